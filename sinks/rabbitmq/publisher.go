package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// errNacked is the outcome of a publish the broker refused with basic.nack
// (a queue over its length limit with overflow reject-publish, or an
// internal error).
var errNacked = errors.New("the broker refused the message (basic.nack)")

// publisher is one AMQP connection with one channel in confirm mode. It
// matches the broker's confirms and returns to the publishes awaiting them.
//
// RabbitMQ sends the basic.return of an unroutable mandatory message before
// its basic.ack. amqp091 hands both over from its single reader goroutine,
// and the returns channel is unbuffered, so the one goroutine that reads
// both (watch) has seen a message's return before it sees its confirm.
type publisher struct {
	conn *amqp.Connection
	ch   *amqp.Channel

	// publishing serialises publishes, so each knows its delivery tag.
	publishing sync.Mutex

	mu      sync.Mutex
	pending map[uint64]*pendingPublish // by delivery tag
	blocked string                     // why the broker blocks publishing; empty when it does not
	closed  error                      // why the channel closed; nil while open
}

// pendingPublish awaits its confirm.
type pendingPublish struct {
	messageID string
	returned  *amqp.Return // set when the broker returned it unroutable
	done      chan error   // receives the outcome; buffered
}

// openPublisher opens a channel in confirm mode on conn and starts
// watching it.
func openPublisher(conn *amqp.Connection, maxInFlight int) (*publisher, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("enable publisher confirms: %w", err)
	}
	p := &publisher{conn: conn, ch: ch, pending: map[uint64]*pendingPublish{}}
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, maxInFlight))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	go p.watch(returns, confirms, closes, blocks)
	return p, nil
}

// watch matches returns and confirms to pending publishes until the
// channel closes, then fails the publishes still pending.
func (p *publisher) watch(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation, closes <-chan *amqp.Error, blocks <-chan amqp.Blocking) {
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			p.markReturned(&r)
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			p.mu.Lock()
			p.blocked = ""
			if b.Active {
				p.blocked = b.Reason
			}
			p.mu.Unlock()
		case c, ok := <-confirms:
			if !ok {
				// amqp091 closes the close listeners before the confirm
				// listeners: the reason, if any, is buffered by now.
				reason := <-closes
				p.failAll(reason)
				return
			}
			p.confirm(c)
		}
	}
}

// markReturned records a return on the oldest pending publish of its
// message id (a message id is a dedup key; two copies are pending only
// when an abandoned attempt's publish overlaps a new one).
func (p *publisher) markReturned(r *amqp.Return) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oldest uint64
	for tag, pp := range p.pending {
		if pp.messageID == r.MessageId && pp.returned == nil && (oldest == 0 || tag < oldest) {
			oldest = tag
		}
	}
	if oldest != 0 {
		p.pending[oldest].returned = r
	}
}

func (p *publisher) confirm(c amqp.Confirmation) {
	p.mu.Lock()
	pp, ok := p.pending[c.DeliveryTag]
	delete(p.pending, c.DeliveryTag)
	p.mu.Unlock()
	switch {
	case !ok: // its delivery gave up waiting
	case !c.Ack:
		pp.done <- errNacked
	case pp.returned != nil:
		pp.done <- &unroutableError{code: pp.returned.ReplyCode, text: pp.returned.ReplyText,
			exchange: pp.returned.Exchange, routingKey: pp.returned.RoutingKey}
	default:
		pp.done <- nil
	}
}

// failAll ends every pending publish with the channel's close reason.
func (p *publisher) failAll(reason *amqp.Error) {
	var err error = amqp.ErrClosed
	if reason != nil {
		err = reason
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = err
	for tag, pp := range p.pending {
		pp.done <- fmt.Errorf("channel closed before the confirm: %w", err)
		delete(p.pending, tag)
	}
}

// publish sends msg, mandatory, and waits for its confirm within ctx.
func (p *publisher) publish(ctx context.Context, exchange, key string, msg amqp.Publishing) error {
	pp := &pendingPublish{messageID: msg.MessageId, done: make(chan error, 1)}
	tag, err := p.send(ctx, exchange, key, msg, pp)
	if err != nil {
		return err
	}
	select {
	case err := <-pp.done:
		return err
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, tag)
		p.mu.Unlock()
		return fmt.Errorf("no confirm from the broker: %w", ctx.Err())
	}
}

// send publishes msg and registers pp under its delivery tag.
func (p *publisher) send(ctx context.Context, exchange, key string, msg amqp.Publishing, pp *pendingPublish) (uint64, error) {
	p.publishing.Lock()
	defer p.publishing.Unlock()
	p.mu.Lock()
	if err := p.unavailable(); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	tag := p.ch.GetNextPublishSeqNo()
	p.pending[tag] = pp
	p.mu.Unlock()
	if err := p.ch.PublishWithContext(ctx, exchange, key, true, false, msg); err != nil {
		p.mu.Lock()
		delete(p.pending, tag)
		p.mu.Unlock()
		return 0, fmt.Errorf("publish: %w", err)
	}
	return tag, nil
}

// unavailable says why nothing can be published now. Callers hold p.mu.
func (p *publisher) unavailable() error {
	if p.closed != nil {
		return fmt.Errorf("channel closed: %w", p.closed)
	}
	if p.blocked != "" {
		return &blockedError{reason: p.blocked}
	}
	return nil
}

// IsClosed reports that the connection or its channel is gone; the sink
// then dials anew.
func (p *publisher) IsClosed() bool { return p.conn.IsClosed() || p.ch.IsClosed() }

// Close closes the connection, and with it the channel.
func (p *publisher) Close() error { return p.conn.Close() }
