package faults_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// faultLease is the lease of the sink fault tests: short, so that
// timeouts and retries happen within seconds.
const faultLease = 2 * time.Second

// TestHangingSinkTimesOutInsideLease: a sink that never answers on its own
// (it returns only when its context ends) is cut off inside the lease, the
// row is retried, and a healthy sink keeps flowing. The hanging sink has a
// max_in_flight of its own, so it claims in a loop of its own. (Mutation:
// deliveryShareOfLease = 1.0 fails this test and the next two: each
// delivery's deadline must leave the lease's last fifth.)
func TestHangingSinkTimesOutInsideLease(t *testing.T) {
	t.Parallel()
	testHangingSink(t, true, 2, 3, faultLease)
}

// TestSinkIgnoringContextDoesNotStallOthers: a sink that ignores its
// context and blocks must not take the relay's delivery slots with it: the
// slot is given back at the delivery deadline, the row is re-claimed when
// its lease expires, and the healthy sink keeps flowing. (Mutation: deliver
// not freeing the slot at the deadline fails this test.)
func TestSinkIgnoringContextDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	testHangingSink(t, false, 2, 3, faultLease)
}

// TestHangingSinkInSharedLoopDoesNotStallOthers: without a max_in_flight
// of its own, a hanging sink shares the relay's claim loop and slots with
// the healthy one. The healthy sink is slowed (its rows queue behind the
// hanging ones, and rows claimed ahead lose their lease budget waiting for a
// slot and are handed back) but not stalled: everything is sent within a
// bounded number of leases. Measured: 20 rows take about 5 leases.
// (Mutation: sharedLoopSinkShare = 1.0 fails this test.)
func TestHangingSinkInSharedLoopDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	testHangingSink(t, false, 0, 2, faultLease)
}

// testHangingSink runs a hanging sink (honouring its context or not, with
// maxInFlight, 0 for the relay's concurrency) next to a healthy one and
// requires each of batches batches of healthy messages to be sent within
// flowWithin. Every delivery's deadline must leave the lease's last fifth
// for the terminal write.
func testHangingSink(t *testing.T, honoursContext bool, maxInFlight, batches int, flowWithin time.Duration) {
	pool, ob := testdb.New(t)
	release := make(chan struct{})
	called, retried := newOnce(), newOnce()
	deadlines := newDeadlineCheck(pool, ob, faultLease)
	hang := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		called.close()
		if d.Attempt >= 2 {
			retried.close()
		}
		deadlines.check(ctx, d)
		if honoursContext {
			<-ctx.Done()
			return ctx.Err()
		}
		<-release
		return nil
	})
	const concurrency = 4
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{Lease: faultLease, PollInterval: 100 * time.Millisecond, Concurrency: concurrency,
		Sinks: []relay.SinkConfig{
			// No breaker: five deadlines in a row open it, and a held row
			// gets its attempt back, so whether a retry came before the
			// opening hung on the claims' order (a loaded machine's CI
			// run waited 20 s for one). Breakers have tests of their own.
			{Name: "hang", Sink: hang, MaxAttempts: 100, MaxInFlight: maxInFlight,
				Backoff:        relay.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond},
				CircuitBreaker: relay.CircuitBreaker{Disabled: true}},
			{Name: "good", Sink: accept},
		},
	})
	// Registered after runRelay so that it runs first: the relay's drain
	// waits for deliveries still inside a sink.
	t.Cleanup(func() { close(release) })
	// More hanging messages than the relay has slots.
	enqueue(t, pool, ob, "hang", "h", 2*concurrency)
	called.wait(t, 10*time.Second, "the hanging sink to be called")
	for b := range batches {
		enqueue(t, pool, ob, "good", "g"+string(rune('a'+b)), 20)
		signals.WaitWritten(t, flowWithin, "good", "sent", 20*(b+1))
	}
	// A sink that honours its context returns the deadline error and its
	// row is retried after the backoff; one that ignores it leaves its row
	// to lease expiry, and the row is re-claimed.
	retried.wait(t, 10*faultLease, "a hanging row to be retried")
	var retriedRows int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM `+ob.Schema()+
		`.messages_all WHERE sink = 'hang' AND attempts >= 2 AND (NOT $1 OR last_error LIKE '%deadline%')`,
		honoursContext).Scan(&retriedRows); err != nil || retriedRows == 0 {
		t.Errorf("no hanging row retried for the reason expected (%v)", err)
	}
	deadlines.report(t)
}

// once is a channel closed at the first of any number of events.
type once struct {
	ch chan struct{}
	do sync.Once
}

func newOnce() *once { return &once{ch: make(chan struct{})} }

func (o *once) close() { o.do.Do(func() { close(o.ch) }) }

func (o *once) wait(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	select {
	case <-o.ch:
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// deliveryShare is the part of the lease a delivery may use, as
// docs/guarantees.md states it: the rest is the terminal write's.
const deliveryShare = 0.8

// deadlineCheck compares each delivery's deadline with its row's lease,
// as PostgreSQL recorded it at the claim.
type deadlineCheck struct {
	pool  *pgxpool.Pool
	ob    *testdb.Outbox
	lease time.Duration

	mu       sync.Mutex
	checked  int
	problems []string
}

func newDeadlineCheck(pool *pgxpool.Pool, ob *testdb.Outbox, lease time.Duration) *deadlineCheck {
	return &deadlineCheck{pool: pool, ob: ob, lease: lease}
}

// check records a problem unless the delivery's deadline leaves at least
// the lease's last (1 - deliveryShare) for the terminal write. The relay
// counts the lease from before its claim statement, the database from
// the statement's start, so the margin the database sees is at least the
// relay's.
func (c *deadlineCheck) check(ctx context.Context, d *sink.Delivery) {
	deadline, ok := ctx.Deadline()
	var expires time.Time
	err := c.pool.QueryRow(context.WithoutCancel(ctx),
		`SELECT lease_expires_at FROM `+c.ob.Schema()+`.messages_all WHERE id = $1`, d.ID).Scan(&expires)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked++
	switch want := time.Duration(float64(c.lease) * (1 - deliveryShare)); {
	case !ok:
		c.problems = append(c.problems, fmt.Sprintf("row %d attempt %d: no deadline", d.ID, d.Attempt))
	case err != nil:
		c.problems = append(c.problems, fmt.Sprintf("row %d: read its lease: %v", d.ID, err))
	case expires.Sub(deadline) < want-deadlineClockSlack:
		c.problems = append(c.problems, fmt.Sprintf("row %d attempt %d: deadline %s before the lease ends, want at least %s",
			d.ID, d.Attempt, expires.Sub(deadline).Round(time.Millisecond), want))
	}
}

// deadlineClockSlack allows for the two clocks' rounding (PostgreSQL keeps
// microseconds).
const deadlineClockSlack = 5 * time.Millisecond

func (c *deadlineCheck) report(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checked == 0 {
		t.Error("no delivery deadline was checked")
	}
	for _, p := range c.problems {
		t.Error(p)
	}
}

// TestPanickingSinkIsRecovered: a sink that panics on one message is
// recovered, the panic recorded as a failed attempt (and, after the last
// attempt, a dead letter), and the relay keeps delivering other messages.
// (Mutation: callSink without its recover fails this test: the test binary
// panics.)
func TestPanickingSinkIsRecovered(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	boom := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		if strings.HasPrefix(d.DedupKey, "boom") {
			panic("sink bug on " + d.DedupKey)
		}
		return accept.Deliver(ctx, d)
	})
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{Lease: faultLease, PollInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: boom, MaxAttempts: 3, Backoff: relay.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}}},
	})
	enqueue(t, pool, ob, "s", "boom", 1)
	enqueue(t, pool, ob, "s", "before", 10)
	signals.WaitWritten(t, 10*time.Second, "s", "dead", 1) // the panicking message, after 3 attempts
	// The relay survived: messages enqueued after the panics are delivered.
	enqueue(t, pool, ob, "s", "after", 10)
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 20)
	if c := testdb.StatusCounts(t, pool, ob, "s"); c["sent"] != 20 || c["dead"] != 1 {
		t.Errorf("rows %v, want 20 sent and the panicking one dead", c)
	}
	rows, err := pool.Query(t.Context(), `SELECT f.attempt, f.error FROM `+ob.Schema()+`.failed_attempts f JOIN `+
		ob.Schema()+`.messages_all m ON m.id = f.message_id WHERE m.dedup_key = 'boom-0' ORDER BY f.attempt`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var attempt int
		var msg string
		if err := rows.Scan(&attempt, &msg); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.Contains(msg, "panicked") || !strings.Contains(msg, "sink bug on boom-0") {
			t.Errorf("attempt %d recorded %q, want the panic", attempt, msg)
		}
	}
	if n != 3 {
		t.Errorf("%d failed attempts recorded for the panicking message, want 3", n)
	}
}
