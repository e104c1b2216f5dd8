package outboxd_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// wake() notifies a registered loop only while it waits for work and only
// for its sinks; with none waiting, an enqueue sends no notification (and
// its commit does not queue for PostgreSQL's notification lock).
// (Mutation: wake() ignoring waiters.waiting fails this test.)
func TestWakeNotifiesOnlyAWaitingLoopOfTheSink(t *testing.T) {
	b := coretest.Setup(t)
	loop := listenAsWaitingLoop(t, b, "mine")
	heard := func() bool { return loop.heard(200 * time.Millisecond) }
	enqueue := func(sink, key string) {
		t.Helper()
		if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: sink, DedupKey: key, Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("mine", "1")
	if !heard() {
		t.Fatal("a waiting loop of the sink was not woken")
	}
	enqueue("other", "2")
	if heard() {
		t.Fatal("a loop was woken for a sink it does not claim for")
	}
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".waiters SET waiting = false WHERE id = $1", loop.id); err != nil {
		t.Fatal(err)
	}
	enqueue("mine", "3")
	if heard() {
		t.Fatal("a busy loop was woken: it claims again by itself")
	}
}

// Every way to enqueue wakes a waiting loop of the sink: Enqueue, and
// EnqueueBatch on a pool, in a transaction and with a duplicate in the
// batch (each takes a statement of its own). (On main before this test the
// batch statements joined their wake-ups with a LEFT JOIN that PostgreSQL
// removes unevaluated, so EnqueueBatch woke nobody and its rows waited for
// the poll interval. Mutation: that LEFT JOIN fails this test.)
func TestEveryEnqueueWakesAWaitingLoop(t *testing.T) {
	b := coretest.Setup(t)
	loop := listenAsWaitingLoop(t, b, "s")
	msg := func(key string) outboxd.Message { return outboxd.Message{Sink: "s", DedupKey: key, Payload: "x"} }
	enqueues := []struct {
		name    string
		enqueue func() error
	}{
		{"Enqueue", func() error { _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, msg("single")); return err }},
		{"EnqueueBatch", func() error {
			_, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, []outboxd.Message{msg("b1"), msg("b2")})
			return err
		}},
		{"EnqueueBatch in a transaction", func() error {
			return pgx.BeginFunc(b.Ctx, b.Pool, func(tx pgx.Tx) error {
				_, err := b.Outbox.EnqueueBatch(b.Ctx, tx, []outboxd.Message{msg("t1"), msg("t2")})
				return err
			})
		}},
		{"EnqueueBatch with a duplicate", func() error {
			_, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, []outboxd.Message{msg("b1"), msg("d1")})
			return err
		}},
		{"Redrive", func() error {
			if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET status = 'dead' WHERE dedup_key = 'single'"); err != nil {
				return err
			}
			_, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, Sink: "s"})
			return err
		}},
	}
	for _, e := range enqueues {
		if err := e.enqueue(); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if !loop.heard(notificationWait) {
			t.Errorf("%s woke no waiting loop", e.name)
		}
	}
}

// notificationWait bounds the wait for a notification sent on commit.
const notificationWait = 5 * time.Second
