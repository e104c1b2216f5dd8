package outboxd_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// waitingLoop stands for a relay's claim loop waiting for work: registered
// for wake-ups for its sinks, listening on its own channel.
type waitingLoop struct {
	id   int64 // its registration
	conn *pgxpool.Conn
	ctx  context.Context
}

// listenAsWaitingLoop registers a waiting loop for sinks and listens on its
// channel until the test ends.
func listenAsWaitingLoop(t *testing.T, b coretest.Bundle, sinks ...string) *waitingLoop {
	t.Helper()
	conn, err := b.Pool.Acquire(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	// The registration a relay's claim loop makes (see package relay).
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	channel := "outboxd_test_wake_" + b.Outbox.Schema()
	id, err := q.RegisterWaiter(b.Ctx, b.Pool, channel, sinks, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(b.Ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return &waitingLoop{id: id, conn: conn, ctx: b.Ctx}
}

// heard reports whether a notification woke the loop within d.
func (l *waitingLoop) heard(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(l.ctx, d)
	defer cancel()
	_, err := l.conn.Conn().WaitForNotification(ctx)
	return err == nil
}
