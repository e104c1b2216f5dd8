package sinks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sethvargo/go-retry"
	"golang.org/x/sync/semaphore"
)

// Defaults of a [Connection]'s redial schedule: after a failed dial the
// next one waits DefaultRedialMin, doubling up to DefaultRedialMax, with
// redialJitterPercent of jitter so the relays of a cluster do not redial a
// recovering broker in step.
const (
	DefaultRedialMin    = 100 * time.Millisecond
	DefaultRedialMax    = 10 * time.Second
	redialJitterPercent = 20
)

// ErrConnectionClosed is returned by [Connection.Get] after Close.
var ErrConnectionClosed = errors.New("connection closed: the sink was shut down")

// Conn is what a broker client's connection offers a [Connection].
type Conn interface {
	// IsClosed reports that the connection broke or was closed and must
	// be dialed anew.
	IsClosed() bool
	Close() error
}

// Connection is the one connection a broker sink instance shares among its
// deliveries. It dials on first use rather than at construction, so a
// broker that is down when outboxd starts only delays deliveries, and it
// dials again when the connection breaks. Failed dials are spaced by an
// exponential backoff (go-retry); in between, Get fails at once with a
// retryable error, so deliveries go back to the outbox to wait instead of
// queueing on a dead broker. It is safe for concurrent use; one dial at a
// time is in progress.
type Connection[C Conn] struct {
	dial        func(context.Context) (C, error)
	dialTimeout time.Duration
	redialMin   time.Duration
	redialMax   time.Duration

	// base is cancelled by Close, ending a dial in progress.
	base   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	conn    C
	live    bool
	closed  bool
	dialing chan struct{} // closed when the dial in progress ends; nil when none
	backoff retry.Backoff // the redial schedule since the last success; nil after one
	retryAt time.Time     // no dial before this
	lastErr error         // why the last dial failed
}

// NewConnection returns a Connection that opens connections with dial,
// giving each dial at most dialTimeout.
func NewConnection[C Conn](dial func(context.Context) (C, error), dialTimeout time.Duration) *Connection[C] {
	base, cancel := context.WithCancel(context.Background())
	return &Connection[C]{
		dial: dial, dialTimeout: dialTimeout,
		redialMin: DefaultRedialMin, redialMax: DefaultRedialMax,
		base: base, cancel: cancel,
	}
}

// Get returns the live connection, dialing one when there is none (or
// waiting, within ctx, for the dial another delivery started). While a
// failed dial's backoff runs it returns an error without dialing. Its
// errors are retryable.
func (c *Connection[C]) Get(ctx context.Context) (C, error) {
	var zero C
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return zero, ErrConnectionClosed
		case c.live && !c.conn.IsClosed():
			conn := c.conn
			c.mu.Unlock()
			return conn, nil
		case c.live: // it broke: release what is left of it and dial anew
			_ = c.conn.Close()
			c.conn, c.live = zero, false
		}
		if wait := c.dialing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return zero, fmt.Errorf("waiting for the broker connection: %w", ctx.Err())
			}
		}
		if wait := time.Until(c.retryAt); wait > 0 {
			err := c.lastErr
			c.mu.Unlock()
			return zero, fmt.Errorf("not connected (next dial in %s): %w", wait.Round(time.Millisecond), err)
		}
		done := make(chan struct{})
		c.dialing = done
		c.mu.Unlock()
		return c.dialOnce(done)
	}
}

// dialOnce runs one dial and records its outcome; done is closed after.
func (c *Connection[C]) dialOnce(done chan struct{}) (C, error) {
	var zero C
	ctx, cancel := context.WithTimeout(c.base, c.dialTimeout)
	conn, err := c.dial(ctx)
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(done)
	c.dialing = nil
	if err != nil {
		if c.backoff == nil {
			c.backoff = retry.WithCappedDuration(c.redialMax,
				retry.WithJitterPercent(redialJitterPercent, retry.NewExponential(c.redialMin)))
		}
		wait, _ := c.backoff.Next()
		c.retryAt, c.lastErr = time.Now().Add(wait), err
		return zero, fmt.Errorf("connect: %w", err)
	}
	if c.closed {
		_ = conn.Close()
		return zero, ErrConnectionClosed
	}
	c.conn, c.live, c.backoff, c.lastErr = conn, true, nil, nil
	return conn, nil
}

// Close closes the connection, if any, and makes every later Get fail.
func (c *Connection[C]) Close() error {
	c.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if !c.live {
		return nil
	}
	c.live = false
	return c.conn.Close()
}

// Link is a broker sink's [Connection] with its bound on outstanding
// publishes: what a delivery (or a batch of them) takes before it
// publishes.
type Link[C Conn] struct {
	conn  *Connection[C]
	slots *semaphore.Weighted
}

// NewLink returns a Link dialing with dial (each dial given dialTimeout)
// and allowing maxInFlight outstanding publishes.
func NewLink[C Conn](dial func(context.Context) (C, error), dialTimeout time.Duration, maxInFlight int) *Link[C] {
	return &Link[C]{conn: NewConnection(dial, dialTimeout), slots: semaphore.NewWeighted(int64(maxInFlight))}
}

// Acquire waits, within ctx, for n publish slots and returns the live
// connection with a function that gives the slots back. Its errors are
// retryable.
func (l *Link[C]) Acquire(ctx context.Context, n int) (C, func(), error) {
	var zero C
	if err := l.slots.Acquire(ctx, int64(n)); err != nil {
		return zero, nil, fmt.Errorf("waiting for a free publish slot: %w", err)
	}
	release := func() { l.slots.Release(int64(n)) }
	c, err := l.conn.Get(ctx)
	if err != nil {
		release()
		return zero, nil, err
	}
	return c, release, nil
}

// Connect makes sure the connection is live, dialing it if needed, and
// publishes nothing: what a sink's Check does when connecting (with its
// credentials) is the whole check.
func (l *Link[C]) Connect(ctx context.Context) error {
	_, release, err := l.Acquire(ctx, 1)
	if err != nil {
		return err
	}
	release()
	return nil
}

// Close closes the connection.
func (l *Link[C]) Close() error { return l.conn.Close() }
