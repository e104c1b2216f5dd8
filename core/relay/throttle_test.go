package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/sinks"
)

// receiver is an HTTP receiver on 127.0.0.1 that answers with answer and
// records when each row (by its X-Outbox-Id header) reached it.
type receiver struct {
	url string
	mu  sync.Mutex
	hit map[int64][]time.Time
}

func newReceiver(t *testing.T, answer http.HandlerFunc) *receiver {
	rc := &receiver{hit: map[int64][]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id, _ := strconv.ParseInt(req.Header.Get("X-Outbox-Id"), 10, 64)
		rc.mu.Lock()
		rc.hit[id] = append(rc.hit[id], time.Now())
		rc.mu.Unlock()
		answer(w, req)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// sink posts each delivery to the receiver and classifies its answer as
// the HTTP sinks do (sinks.ClassifyResponse).
func (rc *receiver) sink() sink.Sink {
	return sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rc.url, bytes.NewReader(d.Payload))
		if err != nil {
			return err
		}
		req.Header.Set("X-Outbox-Id", strconv.FormatInt(d.ID, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer netguard.DiscardBody(resp.Body)
		return sinks.ClassifyResponse(resp)
	})
}

func (rc *receiver) hits() map[int64][]time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[int64][]time.Time, len(rc.hit))
	for id, times := range rc.hit {
		out[id] = append([]time.Time(nil), times...)
	}
	return out
}

// rowCounters returns each row's attempts and deferrals.
func rowCounters(t *testing.T, b coretest.Bundle) map[int64][2]int {
	t.Helper()
	rows, err := b.Pool.Query(b.Ctx, "SELECT id, attempts, deferrals FROM "+b.Outbox.Schema()+".messages_all")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64][2]int{}
	for rows.Next() {
		var id int64
		var attempts, deferrals int
		if err := rows.Scan(&id, &attempts, &deferrals); err != nil {
			t.Fatal(err)
		}
		out[id] = [2]int{attempts, deferrals}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A receiver answering "429 Retry-After: 0" to everything gets each row
// exactly max_deferrals+1 times, no sooner each time than the backoff,
// then the row is dead with a reason naming the budget; no attempt is
// spent on a deferral, and a zero pause pauses (and notifies) nobody.
// (Mutations, each failing this test: finish putting the row off for the
// Retry-After alone, without the backoff's floor, sends a row's requests
// less than the backoff apart; finish without the max_deferrals check
// never dead-letters; limiter.Pause without its zero check records a
// pause.) The sink's circuit breaker is off: this tests the deferral
// mechanism beneath it. With the breaker on, the same storm opens it and
// the cluster sends one probe per probe interval instead
// (TestBreakerRetryAfterForever).
func TestRetryAfterZeroIsBoundedByBackoffAndDeferralBudget(t *testing.T) {
	b := coretest.Setup(t)
	const (
		messages     = 5
		maxDeferrals = 3
		initial      = 100 * time.Millisecond
	)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "storm", Sink: rc.sink(), MaxAttempts: 3, MaxDeferrals: maxDeferrals,
			Backoff: relay.Backoff{Initial: initial, Max: time.Second}, CircuitBreaker: relay.CircuitBreaker{Disabled: true}}}})
	ids := b.EnqueueN(t, "storm", messages, nil)
	signals.WaitWritten(t, 30*time.Second, "storm", "dead", messages)

	hits := rc.hits()
	counters := rowCounters(t, b)
	for _, id := range ids {
		times := hits[id]
		if len(times) != maxDeferrals+1 {
			t.Errorf("row %d: %d requests, want max_deferrals+1 = %d", id, len(times), maxDeferrals+1)
		}
		for i := 1; i < len(times); i++ {
			// The backoff's jitter takes at most 10% off.
			if gap := times[i].Sub(times[i-1]); gap < initial*9/10 {
				t.Errorf("row %d: request %d came %s after the one before, under the backoff's %s", id, i+1, gap, initial)
			}
		}
		if c := counters[id]; c != [2]int{1, maxDeferrals} {
			t.Errorf("row %d: attempts %d, deferrals %d; want 1 (deferrals spend none) and %d", id, c[0], c[1], maxDeferrals)
		}
	}
	dead, err := b.Outbox.DeadLetters(b.Ctx, b.Pool, operator.DeadLetterFilter{Sink: "storm"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		if !strings.Contains(d.LastError, "max_deferrals") {
			t.Errorf("dead row %d: last error %q does not name the deferral budget", d.ID, d.LastError)
		}
	}
	var pauses int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+b.Outbox.Schema()+".sink_limits WHERE paused_until IS NOT NULL").Scan(&pauses); err != nil {
		t.Fatal(err)
	}
	if pauses != 0 {
		t.Errorf("%d pauses recorded for Retry-After: 0", pauses)
	}
}

// A rate limit slower than the lease (one permit per 8s, a lease of 6s)
// delivers every message once, at the limit, with its first attempt, on
// one relay and on three: no claimed row waits for its permit past its
// lease. (Mutation: sinkLoop claiming without its hold-window check and
// Reserve granting every permit asked for, whatever its wait, as before
// this change, fails both subtests: rows wait past their lease, are
// handed back or re-claimed, and are not all sent in time.)
func TestRateSlowerThanTheLeaseDeliversEveryMessageAtTheLimit(t *testing.T) {
	for _, relays := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d relays", relays), func(t *testing.T) {
			b := coretest.Setup(t)
			const (
				messages = 3
				interval = 8 * time.Second
				// Slower permits than the lease, and a lease long enough
				// that a loaded machine's scheduling delays do not make a
				// hand-back arrive after it (a zombie write: its refund is
				// lost and the next claim counts a second attempt).
				lease = 6 * time.Second
			)
			var starts startTimes
			var deliveries atomic.Int32
			fake := sink.Func(func(context.Context, *sink.Delivery) error {
				starts.add()
				deliveries.Add(1)
				return nil
			})
			cfg := relay.Config{Lease: lease, PollInterval: 200 * time.Millisecond,
				Sinks: []relay.SinkConfig{{Name: "slow", Sink: fake, MaxAttempts: 3,
					RateLimit: &sink.RateLimit{Rate: 1, Per: interval}}}}
			signals := &relaysignal.Relay{}
			for range relays {
				testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
			}
			b.EnqueueN(t, "slow", messages, nil)
			signals.WaitWritten(t, time.Duration(messages)*interval+15*time.Second, "slow", "sent", messages)
			if n := deliveries.Load(); n != messages {
				t.Fatalf("%d deliveries of %d messages", n, messages)
			}
			times := starts.sorted()
			// Starts are taken here, after scheduling delays; permits are
			// spaced on the database clock. A quarter interval absorbs that.
			if got := testrelay.MaxInWindow(times, interval*3/4); got > 1 {
				t.Errorf("%d deliveries started within one interval of %s: %v", got, interval, gaps(times))
			}
			// At the limit: one permit per interval, a little slack for
			// the claims that pick each row up. With several relays, one
			// interval more: a row whose permit a loaded machine's relay
			// reserved too late for its hold window is handed back, and
			// that permit is spent (slower, never faster: seen once under
			// -race in CI, 24 s).
			slack := 2 * time.Second
			if relays > 1 {
				slack += interval
			}
			if took, most := times[messages-1].Sub(times[0]), time.Duration(messages-1)*interval+slack; took > most {
				t.Errorf("%d deliveries at one per %s took %s, want at most %s", messages, interval, took, most)
			}
			for id, c := range rowCounters(t, b) {
				if c[0] != 1 {
					t.Errorf("row %d: %d attempts, want 1: waiting for a permit must not spend one", id, c[0])
				}
			}
			if counts := b.StatusCounts(t); counts["sent"] != messages {
				t.Errorf("statuses %v, want %d sent", counts, messages)
			}
		})
	}
}

// With per_key, a receiver's Retry-After pauses that receiver only:
// the sink's other receiver keeps flowing at its own limit meanwhile.
// (Mutation: finish pausing the whole sink for a per_key sink's 429, as
// before this change, holds receiver b for the pause and fails this
// test.)
func TestPerKeyRetryAfterPausesOnlyThatReceiver(t *testing.T) {
	b := coretest.Setup(t)
	const pause = 4 * time.Second
	keyed := &keyedSink{starts: map[string]*startTimes{}, relays: map[string]map[int]bool{}}
	var throttled atomic.Bool
	var throttledAt atomic.Int64
	s := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		if key, _ := keyed.RateKey(d); key == "a" && throttled.CompareAndSwap(false, true) {
			throttledAt.Store(time.Now().UnixNano())
			return sink.RetryAfter(pause, fmt.Errorf("429 from receiver a"))
		}
		return keyed.Deliver(ctx, d)
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 50 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "keyed", Sink: keyedFunc{s, keyed}, MaxInFlight: 2,
			RateLimit: &sink.RateLimit{Rate: 10, Per: time.Second, PerKey: true}}}})
	// a's first row meets the 429; then b's rows come, during a's pause.
	b.EnqueueN(t, "keyed", 1, func(_ int, m *outboxd.Message) { m.Payload = map[string]string{"to": "a"} })
	signals.WaitWritten(t, 10*time.Second, "keyed", "pending", 1)
	b.EnqueueN(t, "keyed", 6, func(i int, m *outboxd.Message) {
		m.DedupKey = fmt.Sprintf("later-%d", i)
		m.Payload = map[string]string{"to": []string{"a", "b", "b", "b", "b", "b"}[i]}
	})
	signals.WaitWritten(t, 10*time.Second, "keyed", "sent", 5)
	at := time.Unix(0, throttledAt.Load())
	keyed.mu.Lock()
	bTimes := keyed.starts["b"].sorted()
	keyed.mu.Unlock()
	if len(bTimes) != 5 {
		t.Fatalf("receiver b: %d deliveries, want 5", len(bTimes))
	}
	if last := bTimes[len(bTimes)-1]; !last.Before(at.Add(pause)) {
		t.Errorf("receiver b's last delivery started %s after a's 429: a's %s pause held b too", last.Sub(at), pause)
	}
	signals.WaitWritten(t, 3*pause, "keyed", "sent", 7)
	keyed.mu.Lock()
	aTimes := keyed.starts["a"].sorted()
	keyed.mu.Unlock()
	for _, started := range aTimes {
		if started.Before(at.Add(pause - 100*time.Millisecond)) {
			t.Errorf("receiver a got a delivery %s after its 429, inside its %s pause", started.Sub(at), pause)
		}
	}
}

// keyedFunc is a sink that delivers with Func and names rate keys as
// keyedSink does.
type keyedFunc struct {
	sink.Func
	keys *keyedSink
}

func (k keyedFunc) RateKey(d *sink.Delivery) (string, error) { return k.keys.RateKey(d) }

// A resume whose notification the relay missed is seen within one poll
// interval: when the relay's listener was reconnecting at the time (its
// LISTEN backend killed), the reconnect reloads the pauses before it wakes
// the loops; when the notification was lost otherwise, the relay's reading
// of the pauses once per poll interval finds the resume.
// (Mutations: the listener not reloading on reconnect fails the first
// subtest, whose poll interval is longer than its deadline; rereadPauses
// returning at once fails the second.)
func TestResumeWithoutItsNotificationIsSeenWithinAPollInterval(t *testing.T) {
	t.Run("listener reconnecting", func(t *testing.T) {
		b := coretest.Setup(t)
		const poll = 30 * time.Second
		signals := resumeSetup(t, b, poll)
		listening := len(signals.Listening.All())
		var killed int
		if err := b.Pool.QueryRow(b.Ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
			"WHERE application_name = 'outboxd-listener' AND strpos(query, $1) > 0", b.Outbox.Schema()).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed != 1 {
			t.Fatalf("killed %d LISTEN backends, want the relay's one", killed)
		}
		if res, err := b.Outbox.ResumeSink(b.Ctx, b.Pool, testdb.Actor, "s", "bob", ""); err != nil || !res.WasPaused {
			t.Fatalf("resume: %v, %v", res, err)
		}
		signals.Listening.WaitCount(t, 10*time.Second, "the listener to reconnect", listening+1)
		signals.WaitWritten(t, 5*time.Second, "s", "sent", 1)
	})
	t.Run("notification lost", func(t *testing.T) {
		b := coretest.Setup(t)
		const poll = time.Second
		signals := resumeSetup(t, b, poll)
		// Resumed as resume_sink.sql does, but without its notifications.
		if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".sink_limits SET paused_until = NULL, manual_until = NULL, until_resumed = false WHERE sink = 's'"); err != nil {
			t.Fatal(err)
		}
		// One poll interval to notice, and margin for a loaded machine.
		signals.WaitWritten(t, poll+3*time.Second, "s", "sent", 1)
	})
}

// resumeSetup runs a relay polling every poll whose sink s is paused until
// resumed, with a row waiting, and returns once the relay knows the pause
// and has looked for work with it in force.
func resumeSetup(t *testing.T, b coretest.Bundle, poll time.Duration) *relaysignal.Relay {
	t.Helper()
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "s", operator.Pause{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: poll,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	signals.Listening.WaitCount(t, 10*time.Second, "the relay listening", 1)
	signals.Idle.WaitCount(t, 10*time.Second, "the claim loop to wait with the sink paused", 1)
	b.EnqueueN(t, "s", 1, nil)
	return signals
}

// A pause committed between a throttled loop's claim and its permit
// reservation hands the claimed rows back at once, their attempts
// refunded, and the loop waits in an idle a resume ends: the row is
// delivered right after the resume, long before the pause's planned end.
// (Mutation: reserve_permits.sql granting permits while the sink is
// paused, with Reserve pushing their waits past the pause as before this
// change, parks the row until the pause ends and fails this test.)
func TestPauseAtReservationReleasesTheClaimedRows(t *testing.T) {
	b := coretest.Setup(t)
	rec := coretest.NewRecordingSink()
	signals := &relaysignal.Relay{}
	var paused atomic.Bool
	signals.BeforeReserve = func(sink string) {
		if paused.CompareAndSwap(false, true) {
			if _, err := b.Outbox.PauseSink(context.Background(), b.Pool, testdb.Actor, sink, operator.Pause{By: "alice"}); err != nil {
				t.Errorf("pause: %v", err)
			}
		}
	}
	testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 50 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "throttled", Sink: rec, RateLimit: &sink.RateLimit{Rate: 10, Per: time.Second}}}}, signals)
	ids := b.EnqueueN(t, "throttled", 1, nil)
	signals.WaitWritten(t, 10*time.Second, "throttled", "pending", 1)
	if c := rowCounters(t, b)[ids[0]]; c[0] != 0 {
		t.Fatalf("the released row has %d attempts, want 0 (refunded)", c[0])
	}
	if n := len(rec.Snapshot()); n != 0 {
		t.Fatalf("%d deliveries while paused", n)
	}
	if res, err := b.Outbox.ResumeSink(b.Ctx, b.Pool, testdb.Actor, "throttled", "bob", ""); err != nil || !res.WasPaused {
		t.Fatalf("resume: %v, %v", res, err)
	}
	signals.WaitWritten(t, 5*time.Second, "throttled", "sent", 1)
	if c := rowCounters(t, b)[ids[0]]; c[0] != 1 {
		t.Errorf("the delivered row has %d attempts, want 1", c[0])
	}
}

// gaps are the spans between consecutive times.
func gaps(times []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(times); i++ {
		out = append(out, times[i].Sub(times[i-1]))
	}
	return out
}
