package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testdb"
)

// recordingSink remembers every delivery, in the order they started, and
// signals each one.
type recordingSink struct {
	mu        sync.Mutex
	delivered []sink.Delivery
	fail      func(d *sink.Delivery) error // nil: every delivery succeeds
	signal    chan struct{}
}

func newRecordingSink() *recordingSink {
	return &recordingSink{signal: make(chan struct{}, 1)}
}

func (s *recordingSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	if s.fail != nil {
		if err := s.fail(d); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.delivered = append(s.delivered, *d)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return nil
}

func (s *recordingSink) snapshot() []sink.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sink.Delivery(nil), s.delivered...)
}

// bundle is what setup returns: an outbox in a schema of its own, a pool
// on it, and a context that ends with the test.
type bundle struct {
	pool *pgxpool.Pool
	ob   *testdb.Outbox
	ctx  context.Context
}

func setup(t *testing.T) bundle {
	t.Helper()
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return bundle{pool: pool, ob: ob, ctx: ctx}
}

// statusCounts returns the number of rows per status.
func statusCounts(t *testing.T, b bundle) map[string]int {
	t.Helper()
	return testdb.StatusCounts(t, b.pool, b.ob, "")
}

// waitingLoop stands for a relay's claim loop waiting for work: registered
// for wake-ups for its sinks, listening on its own channel.
type waitingLoop struct {
	id   int64 // its registration
	conn *pgxpool.Conn
	ctx  context.Context
}

// listenAsWaitingLoop registers a waiting loop for sinks and listens on its
// channel until the test ends.
func listenAsWaitingLoop(t *testing.T, b bundle, sinks ...string) *waitingLoop {
	t.Helper()
	conn, err := b.pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	// The registration a relay's claim loop makes (see package relay).
	q, err := store.New(b.ob.Schema())
	if err != nil {
		t.Fatal(err)
	}
	channel := "outboxd_test_wake_" + b.ob.Schema()
	id, err := q.RegisterWaiter(b.ctx, b.pool, channel, sinks, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(b.ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return &waitingLoop{id: id, conn: conn, ctx: b.ctx}
}

// heard reports whether a notification woke the loop within d.
func (l *waitingLoop) heard(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(l.ctx, d)
	defer cancel()
	_, err := l.conn.Conn().WaitForNotification(ctx)
	return err == nil
}
