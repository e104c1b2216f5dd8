package relay_test

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// keyReceiver is a receiver of one per_key sink: it records when each
// post arrived, takes slow to answer, and answers the posts that answer
// says (by arrival, from 0) with their error.
type keyReceiver struct {
	keyedSink
	slow   time.Duration
	answer func(n int) error

	mu    sync.Mutex
	times []time.Time
}

func newKeyReceiver(slow time.Duration, answer func(n int) error) *keyReceiver {
	return &keyReceiver{keyedSink: keyedSink{starts: map[string]*startTimes{}}, slow: slow, answer: answer}
}

func (k *keyReceiver) Deliver(ctx context.Context, d *sink.Delivery) error {
	k.mu.Lock()
	n := len(k.times)
	k.times = append(k.times, time.Now())
	k.mu.Unlock()
	if k.slow > 0 {
		t := time.NewTimer(k.slow)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if k.answer != nil {
		return k.answer(n)
	}
	return nil
}

// arrivals are the times the receiver saw posts, in order.
func (k *keyReceiver) arrivals() []time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]time.Time(nil), k.times...)
}

// keyedConfig is a relay with one per_key sink, "keyed", limited to one
// post per per on each key, with lease (its hold window is a quarter of
// it).
func keyedConfig(k *keyReceiver, per, lease time.Duration) relay.Config {
	limit := sink.RateLimit{Rate: 1, Per: per, Burst: 1, PerKey: true}
	return relay.Config{PollInterval: 50 * time.Millisecond, Lease: lease,
		Sinks: []relay.SinkConfig{{Name: "keyed", Sink: k, RateLimit: &limit}}}
}

// toOne makes every message go to rate key "a".
func toOne(_ int, m *outboxd.Message) { m.Payload = map[string]string{"to": "a"} }

// paceSlack is how much later than its limit allows a post may come: a
// busy machine's scheduling, a poll interval and a claim.
const paceSlack = 1500 * time.Millisecond

// checkPace fails the test when the posts times came faster than one per
// per (no more than 5 within 4 intervals: a post held up by a busy
// machine may come close to the next, on time), or one came more than
// paceSlack later than the limit allows after the one before: a limit
// held, and not slower than it allows.
func checkPace(t *testing.T, times []time.Time, per time.Duration) {
	t.Helper()
	if got := testrelay.MaxInWindow(times, 4*per); got > 5 {
		t.Errorf("%d posts within %s; the limit is one per %s", got, 4*per, per)
	}
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap > per+paceSlack {
			t.Errorf("posts %d and %d came %s apart; the limit allows one per %s", i-1, i, gap, per)
		}
	}
}

// A key limited to one post per 2 s, longer than the relay's hold window
// (a quarter of a 4 s lease), gets its second message at its next permit.
// Issue 40, defect 1: with one per 10 s, message 2, enqueued a second
// after message 1, was still pending after 2m42s: each claim reserved a
// permit 10 s ahead, beyond the hold window, handed the row back and kept
// the permit, so the key's next permit moved 10 s on at every claim.
// (Mutation: KeyLimit.ahead returning 100 h, i.e. reserve_key_permits.sql
// without its ahead bound as on 8c4a765: message 2 not posted within 8 s.)
func TestSlowKeyLimitPostsTheNextMessageAtItsPermit(t *testing.T) {
	b := coretest.Setup(t)
	const per = 2 * time.Second
	k := newKeyReceiver(0, nil)
	signals := testrelay.Run(t, testdb.Pool(t, 4), b.Outbox.Schema(), keyedConfig(k, per, 4*time.Second))
	b.EnqueueN(t, "keyed", 1, toOne)
	signals.WaitWritten(t, 10*time.Second, "keyed", "sent", 1)
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "keyed", DedupKey: "second", Payload: map[string]string{"to": "a"}}); err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 4*per, "keyed", "sent", 2)
	checkPace(t, k.arrivals(), per)
}

// Two relays share a key limited to one post per 500 ms with 40 rows: the
// key's posts come one per interval to the end, none sooner and none much
// later. Issue 40, defect 1: two relays, one per second, 300 rows on one
// key stalled after 48 posts for 47 s: claims of both relays reserved
// permits beyond the hold window and kept them, so the key's schedule ran
// away from the clock. (Mutation: KeyLimit.ahead returning 100 h, as
// reserve_key_permits.sql without its ahead bound on 8c4a765: the 40 rows
// not all posted within 40 s.)
func TestKeyLimitSharedByTwoRelaysKeepsItsPace(t *testing.T) {
	b := coretest.Setup(t)
	const (
		per  = 500 * time.Millisecond
		rows = 40
	)
	k := newKeyReceiver(0, nil)
	signals := &relaysignal.Relay{}
	for range 2 {
		testrelay.RunWith(t, testdb.Pool(t, 4), b.Outbox.Schema(), keyedConfig(k, per, 2*time.Second), signals)
	}
	b.EnqueueN(t, "keyed", rows, toOne)
	signals.WaitWritten(t, 40*time.Second, "keyed", "sent", rows)
	checkPace(t, k.arrivals(), per)
}

// A key whose first post is answered 429 with a Retry-After longer than
// the hold window gets its next post when the pause ends, and the rest at
// its limit. Issue 40, defect 1: one per second, Retry-After: 20, the
// next post came 467 s later: every claim during the pause reserved a
// permit past it, handed the row back and kept the permit. (Mutations:
// KeyLimit.ahead returning 100 h, as reserve_key_permits.sql without its
// ahead bound on 8c4a765: the 8 rows not all posted within 30 s; admit
// without its keyPaused check: the post after the 429 came 500 ms after
// it, on a permit reserved before the 429 came back.)
func TestKeyRetryAfterLongerThanTheHoldWindowDelaysOnlyThePause(t *testing.T) {
	b := coretest.Setup(t)
	const (
		per   = 500 * time.Millisecond
		pause = 3 * time.Second
		rows  = 8
	)
	k := newKeyReceiver(0, func(n int) error {
		if n == 0 {
			return sink.RetryAfter(pause, errors.New("429 Too Many Requests"))
		}
		return nil
	})
	signals := testrelay.Run(t, testdb.Pool(t, 4), b.Outbox.Schema(), keyedConfig(k, per, 2*time.Second))
	b.EnqueueN(t, "keyed", rows, toOne)
	signals.WaitWritten(t, 30*time.Second, "keyed", "sent", rows)
	times := k.arrivals()
	if len(times) != rows+1 {
		t.Fatalf("%d posts, want %d (one answered 429, then each row once)", len(times), rows+1)
	}
	if gap := times[1].Sub(times[0]); gap < pause-50*time.Millisecond || gap > pause+2*time.Second {
		t.Errorf("the post after the 429 came %s after it; its Retry-After was %s", gap, pause)
	}
	checkPace(t, times[1:], per)
}

// A key at its limit, or at its share of the slots, and a sink at its
// limit have their rows left alone in the table: the messages table sees at most one row update per
// delivery beyond the claim's (a delivered row leaves the table, so the
// finish deletes it). Issue 40, defect 5: a receiver taking 3 s per post,
// 3,000 rows for one key at one per second: 48 deliveries and 88,954 row
// updates of messages in 20 s, the key's rows claimed and handed back
// every second. (Mutations: keyedClaims.observe claiming BatchSize rows
// and never waiting, as on 8c4a765: 6,264 and 9,544 updates for 30 and
// 26 deliveries; sinkLoop claiming a second's permits whatever the next
// permit, as on 8c4a765: 194 updates for 30 deliveries to a sink at its
// limit; keyedClaims.observe rechecking a single key slower than one a
// second every second, as before: 28 updates for the 10 deliveries of
// a key at one per 2 s with a backlog, measured 16 with its wait;
// keyedClaims.observe growing one key's claims past the slots it has
// left, dispatchByKey keeping a Freed from before it counted the room,
// and a wait for a key at its share cut short by a delivery's end before
// the key's next permit: 94 updates for 42 deliveries at its share of the
// slots and 75 for 47 at its limit, on a loaded machine; 44 and 53 without.)
func TestKeyAtItsLimitHasItsRowsLeftAlone(t *testing.T) {
	for _, c := range []struct {
		name string
		per  time.Duration // the key's limit, one post per per
		slow time.Duration // how long the receiver takes per post
		// slots is the relay's in-flight slots (the key may hold an
		// eighth), least the pace the key keeps.
		slots int
		least float64
		// wholeSink limits the sink as a whole instead of per key.
		wholeSink bool
		// rows are enqueued, deliveries awaited (defaults 2,000 and 40).
		rows, deliveries int
	}{
		{name: "at its limit", per: 250 * time.Millisecond, slow: 750 * time.Millisecond, slots: 64, least: 4 * 0.7},
		{name: "at its share of the slots", per: 10 * time.Millisecond, slow: 500 * time.Millisecond, slots: 16, least: 2 / 0.5 * 0.7},
		{name: "a sink at its limit", per: 250 * time.Millisecond, slow: 750 * time.Millisecond, slots: 64, least: 4 * 0.7, wholeSink: true},
		{name: "a key slower than one a second with a backlog", per: 2 * time.Second, slots: 64, least: 0.5 * 0.7, rows: 10, deliveries: 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := coretest.Setup(t)
			rows, deliveries := cmp.Or(c.rows, 2000), cmp.Or(c.deliveries, 40)
			k := newKeyReceiver(c.slow, nil)
			cfg := keyedConfig(k, c.per, 0)
			cfg.Sinks[0].MaxInFlight = c.slots
			cfg.Sinks[0].RateLimit.PerKey = !c.wholeSink
			pool := testdb.Pool(t, 4)
			r := testrelay.New(t, pool, b.Outbox.Schema(), cfg)
			b.EnqueueN(t, "keyed", rows, toOne)
			signals := &relaysignal.Relay{}
			ctx, cancel := context.WithCancel(relaysignal.WithRelay(context.Background(), signals))
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			signals.WaitWritten(t, time.Minute, "keyed", "sent", deliveries)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			updates := messageUpdates(t, b, pool)
			sent := testdb.StatusCounts(t, b.Pool, b.Outbox, "keyed")["sent"]
			times := k.arrivals()
			if perSecond := float64(len(times)-1) / times[len(times)-1].Sub(times[0]).Seconds(); perSecond < c.least {
				t.Errorf("%.1f posts a second, want at least %.1f", perSecond, c.least)
			}
			t.Logf("%d row updates of messages for %d deliveries", updates, sent)
			if float64(updates) > 2*float64(sent) {
				t.Fatalf("%d row updates of messages for %d deliveries: more than one beyond the claim per delivery", updates, sent)
			}
		})
	}
}

// messageUpdates is how many row updates b's messages table has seen, once
// every session that wrote them on pool (a stopped relay's) has ended. A
// PostgreSQL 15 session reports its table statistics at most once a second
// while it is busy, and only after up to ten seconds idle: one that ends
// reports them before it leaves pg_stat_activity.
func messageUpdates(t *testing.T, b coretest.Bundle, pool *pgxpool.Pool) int64 {
	t.Helper()
	var pids []int32
	for _, c := range pool.AcquireAllIdle(b.Ctx) {
		var pid int32
		if err := c.QueryRow(b.Ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
		c.Release()
	}
	pool.Close()
	testrelay.WaitFor(t, 30*time.Second, "the relay's sessions to end", func() bool {
		var left int
		err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", pids).Scan(&left)
		return err == nil && left == 0
	})
	var updates int64
	if _, err := b.Pool.Exec(b.Ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		t.Fatal(err)
	}
	err := b.Pool.QueryRow(b.Ctx, "SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'",
		b.Outbox.Schema()).Scan(&updates)
	if err != nil {
		t.Fatal(err)
	}
	return updates
}
