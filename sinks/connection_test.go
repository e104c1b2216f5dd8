package sinks_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/sinks"
)

// fakeConn is a connection whose breaking the test controls.
type fakeConn struct{ closed atomic.Bool }

func (c *fakeConn) IsClosed() bool { return c.closed.Load() }
func (c *fakeConn) Close() error   { c.closed.Store(true); return nil }

// A failed dial is not repeated before its backoff runs out, during which
// Get fails at once; a live connection is shared; a broken one is replaced.
func TestConnectionRedialsWithBackoff(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	c := sinks.NewConnection(func(context.Context) (*fakeConn, error) {
		dials.Add(1)
		if fail.Load() {
			return nil, errors.New("connection refused")
		}
		return &fakeConn{}, nil
	}, time.Second)
	defer c.Close()

	if _, err := c.Get(t.Context()); err == nil {
		t.Fatal("a failing dial gave a connection")
	}
	if _, err := c.Get(t.Context()); err == nil || dials.Load() != 1 {
		t.Fatalf("second Get within the backoff: err %v after %d dials, want an error without dialing", err, dials.Load())
	}
	fail.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	var conn *fakeConn
	for conn == nil && time.Now().Before(deadline) {
		conn, _ = c.Get(t.Context())
		time.Sleep(10 * time.Millisecond)
	}
	if conn == nil {
		t.Fatal("no connection after the backoff")
	}
	if again, _ := c.Get(t.Context()); again != conn {
		t.Error("a live connection was not shared")
	}
	conn.closed.Store(true)
	if next, err := c.Get(t.Context()); err != nil || next == conn {
		t.Errorf("after the connection broke: %v, %v; want a new connection", next, err)
	}
	_ = c.Close()
	if _, err := c.Get(t.Context()); !errors.Is(err, sinks.ErrConnectionClosed) {
		t.Errorf("after Close: %v", err)
	}
}
