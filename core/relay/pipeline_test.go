package relay_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// timedReceiver is a real HTTP receiver on 127.0.0.1 answering a status a
// test switches, and noting when each request came.
type timedReceiver struct {
	srv    *httptest.Server
	status atomic.Int64
	mu     sync.Mutex
	times  []time.Time
}

func newTimedReceiver(t *testing.T, status int) *timedReceiver {
	t.Helper()
	rc := &timedReceiver{}
	rc.status.Store(int64(status))
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc.mu.Lock()
		rc.times = append(rc.times, time.Now())
		rc.mu.Unlock()
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *timedReceiver) requests() []time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]time.Time(nil), rc.times...)
}

// breakerHook is a webhook sink "hook" to url (digests included: a
// sink.DigestSink) whose breaker opens after opensAfter failures in a row
// and is probed every probe, its rows dead after maxAttempts.
func breakerHook(t *testing.T, url string, maxAttempts, opensAfter int, probe time.Duration) relay.SinkConfig {
	t.Helper()
	s, err := webhook.Type.New("hook", map[string]any{"url": url, "allow_private": true, "timeout": "2s"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return relay.SinkConfig{Name: "hook", Type: "webhook", Sink: s, MaxAttempts: maxAttempts,
		CircuitBreaker: relay.CircuitBreaker{ConsecutiveFailures: opensAfter, MinDeliveries: 100,
			ProbeInterval: probe, MaxProbeInterval: probe}}
}

// runHook runs a relay of schema polling every 50 ms for the sink sc.
func runHook(t *testing.T, b coretest.Bundle, schema string, sc relay.SinkConfig) *relaysignal.Relay {
	t.Helper()
	return testrelay.Run(t, b.Pool, schema, relay.Config{PollInterval: 50 * time.Millisecond, Sinks: []relay.SinkConfig{sc}})
}

// breakerOpened waits for the first breaker change, an opening.
func breakerOpened(t *testing.T, signals *relaysignal.Relay) {
	t.Helper()
	signals.Breaker.Wait(t, 30*time.Second, "the breaker to open", func(all []relaysignal.BreakerChange) bool { return len(all) > 0 })
	if c := signals.Breaker.All()[0]; !c.Open {
		t.Fatalf("first breaker change %+v, want an opening", c)
	}
}

// TestDigestsCountTowardTheBreaker is issue 40's defect 2: a digested
// webhook sink before a receiver answering 503, max_attempts 3. Each
// digest's failure counts toward the breaker as a row's does: the breaker
// opens, no member dies, and once the receiver is back a probe (the digest
// itself) closes the breaker and every row is delivered. The breaker opens
// after 2 failures here, fewer than max_attempts: whether an outage may
// spend a row's last attempt before the breaker opens is item 7's, not
// this test's.
//
// Checked with the mutation "digester.finish skips feedback": no breaker
// opened (the wait for it timed out) and all ten rows ended dead.
func TestDigestsCountTowardTheBreaker(t *testing.T) {
	b := coretest.Setup(t)
	rc := newTimedReceiver(t, http.StatusServiceUnavailable)
	const probe = 300 * time.Millisecond
	sc := breakerHook(t, rc.srv.URL, 3, 2, probe)
	sc.Backoff = relay.Backoff{Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond}
	sc.Digest = &sink.DigestPolicy{MaxMessages: 50}
	signals := runHook(t, b, b.Outbox.Schema(), sc)
	const n = 10
	b.EnqueueN(t, "hook", n, func(i int, m *outboxd.Message) { m.DedupKey = fmt.Sprintf("d-%d", i) })
	breakerOpened(t, signals)
	if counts := b.StatusCounts(t); counts["dead"] != 0 {
		t.Fatalf("rows %v once the breaker opened, want none dead", counts)
	}
	rc.status.Store(http.StatusOK)
	signals.WaitWritten(t, 30*time.Second, "hook", "sent", n)
	if counts := b.StatusCounts(t); counts["dead"] != 0 || counts["sent"] != n {
		t.Errorf("rows %v after the receiver healed, want all %d sent", counts, n)
	}
	closed := false
	for _, c := range signals.Breaker.All() {
		closed = closed || !c.Open
	}
	if !closed {
		t.Error("the breaker did not close")
	}
}

// TestProbesTakeAPermit is issue 40's defect 3: a webhook sink limited to
// one delivery per 2 s, whose breaker opens at the first 503 and is probed
// every 200 ms. The probe takes a permit like any delivery: no two
// requests reach the receiver closer than the limit allows, the probe
// included, and the rows after it too.
//
// Checked with the mutation "takePermit returns permitAfter(0) for every
// sink" (the probe takes no permit): the probe came about 1 s after the
// failure that opened the breaker (once the next permit was within
// reach), and the next row about 1 s after the probe.
func TestProbesTakeAPermit(t *testing.T) {
	b := coretest.Setup(t)
	rc := newTimedReceiver(t, http.StatusServiceUnavailable)
	const interval = 2 * time.Second
	sc := breakerHook(t, rc.srv.URL, 10, 1, 200*time.Millisecond)
	sc.RateLimit = &sink.RateLimit{Rate: 1, Per: interval}
	signals := runHook(t, b, b.Outbox.Schema(), sc)
	const n = 3
	b.EnqueueN(t, "hook", n, func(i int, m *outboxd.Message) { m.DedupKey = fmt.Sprintf("p-%d", i) })
	breakerOpened(t, signals)
	rc.status.Store(http.StatusOK)
	signals.WaitWritten(t, time.Minute, "hook", "sent", n)
	// Permits are one interval apart from the first; a request may come
	// later than its permit (a busy machine), never sooner. So each
	// request is measured from the first, and the slack only covers the
	// first coming late: without a permit the probe came 1 s or less after
	// it.
	const slack = 500 * time.Millisecond
	times := rc.requests()
	for i := 1; i < len(times); i++ {
		if since := times[i].Sub(times[0]); since < time.Duration(i)*interval-slack {
			t.Errorf("request %d came %s after the first, want at least %d intervals of the limit's %s (requests at %v)",
				i, since.Round(time.Millisecond), i, interval, times)
		}
	}
	if len(times) < n+1 {
		t.Errorf("%d requests, want the failure, the probe and the other rows (%d at least)", len(times), n+1)
	}
}

// TestProbeRefusedUnsentSettlesNothing is issue 40's defect 6: the row
// a breaker's probe claims cannot be sent at all (its headers do not
// decode, or its attempts are used up). It is dead-lettered unsent, and
// the breaker of the receiver, which still answers 503, stays open: the
// row said nothing about the receiver.
//
// Checked with the mutation "refuse calls finish instead of
// finishUnsent" (the refused row goes through feedback): the probe's
// refusal counted as an answer and closed the breaker, in both cases.
func TestProbeRefusedUnsentSettlesNothing(t *testing.T) {
	for name, spoil := range map[string]string{
		"undecodable":        `headers = '{"x-retries": 1}'`,
		"attempts exhausted": `attempts = 5`,
	} {
		t.Run(name, func(t *testing.T) {
			b := coretest.Setup(t)
			schema := b.Outbox.Schema()
			if _, err := b.Pool.Exec(b.Ctx, "ALTER TABLE "+schema+".messages DROP CONSTRAINT messages_headers_check"); err != nil {
				t.Fatal(err)
			}
			rc := newTimedReceiver(t, http.StatusServiceUnavailable)
			// The first probe comes a second after the opening: time for
			// the test to spoil the row before it.
			signals := runHook(t, b, schema, breakerHook(t, rc.srv.URL, 5, 1, time.Second))
			id := b.EnqueueN(t, "hook", 1, nil)[0]
			breakerOpened(t, signals)
			// Once the failed attempt is written (the row no longer in
			// progress), the row is spoiled for the probe that claims it.
			testrelay.WaitFor(t, 30*time.Second, "the failed attempt written", func() bool {
				return b.StatusCounts(t)["in_progress"] == 0
			})
			tag, err := b.Pool.Exec(b.Ctx, "UPDATE "+schema+".messages SET "+spoil+" WHERE id = $1 AND status <> 'in_progress'", id)
			if err != nil || tag.RowsAffected() != 1 {
				t.Fatalf("spoiling the row: %v (%d rows)", err, tag.RowsAffected())
			}
			signals.WaitWritten(t, 30*time.Second, "hook", "dead", 1)
			for _, c := range signals.Breaker.All() {
				if !c.Open {
					t.Errorf("breaker change %+v: a probe refused unsent closed the breaker of a receiver still down", c)
				}
			}
			var open int
			if err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+schema+".destination_breakers WHERE sink = 'hook'").Scan(&open); err != nil {
				t.Fatal(err)
			}
			if open != 1 {
				t.Errorf("%d breaker rows for the sink, want its breaker still open", open)
			}
		})
	}
}
