package rabbitmq

import (
	"context"
	"fmt"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// heartbeat is the AMQP heartbeat interval: a broker that vanishes without
// closing the TCP connection is noticed within two of them.
const heartbeat = 10 * time.Second

// Sink publishes each message to a RabbitMQ exchange with publisher
// confirms. It is safe for concurrent use: deliveries share one
// connection and channel, dialed on first use.
type Sink struct {
	name   string
	cfg    config
	link   *sinks.Link[*publisher]
	redact secret.Scrubber
}

// Receipt is what a sent row's receipt column records: where the message
// was published.
type Receipt struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
}

// Type is the rabbitmq sink type, "rabbitmq" in plugins.yaml, with its
// options ([Options]); package sinks/builtin lists it.
var Type = registry.Define("rabbitmq", Description, DefaultOptions(), newSink)

// Description says in one line what a rabbitmq sink delivers to.
const Description = "Publishes each message to a RabbitMQ exchange with publisher confirms"

// newSink builds the rabbitmq sink called name from its decoded options.
// It does not connect: the first delivery does. See the package
// documentation for the options.
func newSink(name string, o Options, _ sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	s := &Sink{name: name, cfg: c, redact: secret.NewScrubber(urlPassword(c.URL), string(c.Password))}
	s.link = sinks.NewLink(s.dial, c.ConnectTimeout, c.MaxInFlight)
	return s, nil
}

// dial connects to the broker and opens the confirming channel.
func (s *Sink) dial(context.Context) (*publisher, error) {
	cfg := amqp.Config{
		Dial:       amqp.DefaultDial(s.cfg.ConnectTimeout),
		Heartbeat:  heartbeat,
		Properties: amqp.Table{"connection_name": "outboxd sink " + s.name},
	}
	if s.cfg.Username != "" {
		cfg.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: s.cfg.Username, Password: string(s.cfg.Password)}}
	}
	conn, err := amqp.DialConfig(s.cfg.URL, cfg)
	if err != nil {
		return nil, err
	}
	p, err := openPublisher(conn, s.cfg.MaxInFlight)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return p, nil
}

// Deliver publishes d to the exchange, mandatory and persistent, with
// message-id set to the dedup key, and returns once the broker confirmed
// it. See the package documentation for how failures map to outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	key, err := s.cfg.routingKey.Render(s.name, d)
	if err != nil {
		return s.wrap(sink.Permanent(err))
	}
	p, release, err := s.link.Acquire(ctx, 1)
	if err != nil {
		return s.wrap(err)
	}
	defer release()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := p.publish(pctx, s.cfg.Exchange, key, s.message(ctx, d)); err != nil {
		return s.wrap(classify(err))
	}
	return d.SetReceipt(Receipt{Exchange: s.cfg.Exchange, RoutingKey: key})
}

// message builds the AMQP message of d: the payload as it was enqueued,
// persistent, message-id = dedup key, and the row's headers with the
// delivery's trace context.
func (s *Sink) message(ctx context.Context, d *sink.Delivery) amqp.Publishing {
	headers := amqp.Table{}
	for k, v := range sinks.MessageHeaders(ctx, d) {
		headers[k] = v
	}
	return amqp.Publishing{
		Headers:      headers,
		ContentType:  DefaultContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    d.DeliveryID(),
		Timestamp:    d.CreatedAt,
		Body:         d.Payload,
	}
}

// Close closes the sink's connection. Deliveries after Close fail.
func (s *Sink) Close() error { return s.link.Close() }

var _ sink.Checker = (*Sink)(nil)

// Check connects (with the configured credentials) and opens the
// confirming channel deliveries publish on; nothing is published.
func (s *Sink) Check(ctx context.Context) error {
	if err := s.link.Connect(ctx); err != nil {
		return s.wrap(err)
	}
	return nil
}

// wrap names the sink in err, keeping its class, and removes secrets a
// client error might quote.
func (s *Sink) wrap(err error) error {
	return s.redact.Error(fmt.Errorf("rabbitmq %q: %w", s.name, err))
}

// urlPassword returns the password of an AMQP URL, for redaction.
func urlPassword(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		p, _ := u.User.Password()
		return p
	}
	return ""
}
