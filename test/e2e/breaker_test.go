package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/status"
)

// These tests run issue 21's incidents against the real binary with the
// circuit breaker's DEFAULT settings: the configurations set only
// max_attempts, backoff, rate_limit and relay.lease, as an operator would.

// flakyReceiver is a webhook endpoint whose answer a test switches: a
// status (with a Retry-After, if set) for every request, but 500 for a
// payload holding "poison" (a message the receiver always fails, as
// opposed to a 4xx, which dead-letters at once). It counts every request
// and keeps the bodies of those it accepted.
type flakyReceiver struct {
	*httptest.Server
	mu         sync.Mutex
	status     int
	retryAfter string
	errorBody  string // the body of a failure's answer, if set
	requests   int
	accepted   []string
	acceptedAt []time.Time // when each accepted request arrived
}

func newFlakyReceiver(t *testing.T, status int) *flakyReceiver {
	r := &flakyReceiver{status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests++
		status := r.status
		if strings.Contains(string(body), "poison") {
			status = http.StatusInternalServerError
		}
		if r.retryAfter != "" {
			w.Header().Set("Retry-After", r.retryAfter)
		}
		if status < 300 {
			r.accepted = append(r.accepted, string(body))
			r.acceptedAt = append(r.acceptedAt, time.Now())
		}
		if status >= 300 && r.errorBody != "" {
			http.Error(w, r.errorBody, status)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// acceptedSpan is the time from the first accepted request to the last.
func (r *flakyReceiver) acceptedSpan() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.acceptedAt) < 2 {
		return 0
	}
	return r.acceptedAt[len(r.acceptedAt)-1].Sub(r.acceptedAt[0])
}

// answer makes the receiver answer status from now on.
func (r *flakyReceiver) answer(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

// counts returns the requests so far and how many were accepted.
func (r *flakyReceiver) counts() (requests, accepted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, len(r.accepted)
}

// breakerEvent is an outboxd.destination.* event as a webhook without a
// template delivers it.
type breakerEvent struct {
	Type string `json:"type"`
	Data struct {
		Sink   string    `json:"sink"`
		Key    string    `json:"key"`
		Reason string    `json:"reason"`
		Since  time.Time `json:"since"`
	} `json:"data"`
}

// events returns the outboxd.destination.* events the receiver accepted.
func (r *flakyReceiver) events(t *testing.T) []breakerEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []breakerEvent
	for _, body := range r.accepted {
		if !strings.Contains(body, "outboxd.destination.") {
			continue
		}
		var ev breakerEvent
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			t.Fatalf("event body %s: %v", body, err)
		}
		out = append(out, ev)
	}
	return out
}

// eventOf returns the first event of type typ among evs.
func eventOf(evs []breakerEvent, typ string) (breakerEvent, bool) {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev, true
		}
	}
	return breakerEvent{}, false
}

// sinkYAML is the sinks block entry of a webhook sink to url with the
// given max_attempts, a 100ms..200ms backoff and extra lines (indented by
// four spaces).
// outageMaxAttempts is the max_attempts of a sink whose receiver is down
// in a test that wants none of its rows dead: still spent in about two
// seconds at the backoff sinkYAML sets, long before the outage ends, but a
// row's attempts can only all fail once one of two relays has seen
// consecutive_failures of them in a row and opened the breaker. With 3, a
// loaded machine dead-lettered a row before its relay saw the fifth
// failure: what docs/guarantees.md says the breaker does not promise.
const outageMaxAttempts = 2 * relay.DefaultBreakerConsecutiveFailures

func sinkYAML(name, url string, maxAttempts int, extra string) string {
	return fmt.Sprintf("  %s:\n    type: webhook\n    max_attempts: %d\n    backoff: {initial: 100ms, max: 200ms}\n%s    options: {url: %q, secret: %q, allow_private: true}\n",
		name, maxAttempts, extra, url, webhookSecret)
}

// oneSinkEnv is a migrated env whose one sink, name (max_attempts 3,
// sinkExtra), delivers to a new flakyReceiver answering status; environ
// is added to every run of the binary.
func oneSinkEnv(t *testing.T, name string, status int, sinkExtra string, environ ...string) (*flakyReceiver, *env) {
	t.Helper()
	rcv := newFlakyReceiver(t, status)
	e := newEnv(t, sinkYAML(name, rcv.URL, 3, sinkExtra), "")
	e.extra = environ
	e.mustRun("migrate")
	return rcv, e
}

// sinkReport is one sink of `outboxd stats --json`, as far as the
// breaker tests read it.
type sinkReport struct {
	Pending  int    `json:"pending"`
	Dead     int    `json:"dead"`
	Sent     int    `json:"sent_last_hour"`
	Circuit  string `json:"circuit"`
	Breakers []struct {
		Key         string    `json:"key"`
		State       string    `json:"state"`
		Since       time.Time `json:"since"`
		LastFailure string    `json:"last_failure"`
		NextProbe   time.Time `json:"next_probe"`
		Probes      int       `json:"probes"`
	} `json:"breakers"`
	Pause *struct {
		ByHand       bool   `json:"by_hand"`
		UntilResumed bool   `json:"until_resumed"`
		ChangedBy    string `json:"changed_by"`
	} `json:"pause"`
}

// report runs `outboxd stats --json`.
func (e *env) report() map[string]sinkReport {
	e.t.Helper()
	var r struct{ Sinks map[string]sinkReport }
	if err := json.Unmarshal([]byte(e.mustRun("stats", "--json")), &r); err != nil {
		e.t.Fatal(err)
	}
	return r.Sinks
}

// rowCounts returns sink's rows by status, and the most attempts and
// deferrals any of them has.
func (e *env) rowCounts(sink string) (byStatus map[string]int, maxAttempts, maxDeferrals int) {
	e.t.Helper()
	rows, err := e.pool.Query(e.t.Context(), "SELECT status, count(*), max(attempts), max(deferrals) FROM "+e.schema+
		".messages_all WHERE sink = $1 GROUP BY status", sink)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	byStatus = map[string]int{}
	for rows.Next() {
		var status string
		var n, attempts, deferrals int
		if err := rows.Scan(&status, &n, &attempts, &deferrals); err != nil {
			e.t.Fatal(err)
		}
		byStatus[status] = n
		maxAttempts, maxDeferrals = max(maxAttempts, attempts), max(maxDeferrals, deferrals)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return byStatus, maxAttempts, maxDeferrals
}

// metricsOf returns the lines of a server's /metrics that name outbox_
// and outboxd_ metrics.
func metricsOf(t *testing.T, s *server) string {
	t.Helper()
	resp, err := http.Get(s.url("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return grepLines(string(raw), "outbox")
}

// metricValue sums the values of the samples of metric name whose labels
// hold every one of labels, on every server.
func metricValue(t *testing.T, servers []*server, name string, labels ...string) float64 {
	t.Helper()
	total := 0.0
	for _, s := range servers {
	lines:
		for line := range strings.Lines(metricsOf(t, s)) {
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			for _, l := range labels {
				if !strings.Contains(line, l) {
					continue lines
				}
			}
			var v float64
			fields := strings.Fields(line)
			if _, err := fmt.Sscan(fields[len(fields)-1], &v); err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			total += v
		}
	}
	return total
}

// TestServeOutageBesideAHealthySink is issue 21's acceptance run, on two
// relays with the breaker's defaults: a receiver answering 503 for longer
// than the retry budget (10 attempts 100-200ms apart) beside a healthy sink
// that also gets poison messages, and a route sending
// outboxd.destination.* to both. Once the down receiver recovers, every
// one of its messages is sent, none dead, after a bounded number of
// requests; the poison messages are dead at exactly max_attempts; the
// healthy sink gets the opened and closed events (sink, key, reason,
// since), the down one neither; stats and /metrics show the breaker open
// and then closed, with its opening and its probe counted.
//
// Checked with the mutations, each failing it: `circuit_breaker: {enabled:
// false}` on the down sink (the breaker never opened: timed out);
// breakerevent.Publish keeping the rows for the unhealthy sink itself (the
// down receiver got its own breaker's events); relay.closeBreaker without
// its publishBreakerEvent (no closed event: timed out); openBreaker not
// adding to the circuit_opens counter (outbox_sink_circuit_opens_total 0).
func TestServeOutageBesideAHealthySink(t *testing.T) {
	t.Parallel()
	down := newFlakyReceiver(t, http.StatusServiceUnavailable)
	healthy := newFlakyReceiver(t, http.StatusOK)
	const maxAttempts = 3
	routes := "routes:\n  breaker-news:\n    events: [outboxd.destination.*]\n    to: [ops, down]\nroutes_unmatched: drop\n"
	e := newEnv(t, sinkYAML("down", down.URL, outageMaxAttempts, "")+sinkYAML("ops", healthy.URL, maxAttempts, ""), routes)
	e.mustRun("migrate")
	servers := []*server{e.serve(), e.serve()}

	const messages, good, poison = 30, 20, 2
	for i := range messages {
		e.mustRun("enqueue", "--sink", "down", "--key", fmt.Sprintf("d-%d", i), "--text", "to the down receiver")
	}
	for i := range good + poison {
		text := "healthy"
		if i < poison {
			text = "poison"
		}
		e.mustRun("enqueue", "--sink", "ops", "--key", fmt.Sprintf("o-%d", i), "--text", text)
	}
	eventually(t, 30*time.Second, "the down sink's breaker to open", func() bool { return e.report()["down"].Circuit == "open" })
	r := e.report()["down"]
	if len(r.Breakers) != 1 || r.Breakers[0].Key != "" || !strings.Contains(r.Breakers[0].LastFailure, "503") ||
		r.Breakers[0].Since.IsZero() || !r.Breakers[0].NextProbe.After(r.Breakers[0].Since) {
		t.Errorf("stats of the open breaker: %+v", r.Breakers)
	}
	eventually(t, 30*time.Second, "the opened event at the healthy sink", func() bool {
		_, ok := eventOf(healthy.events(t), status.EventDestinationOpened)
		return ok
	})
	opened, _ := eventOf(healthy.events(t), status.EventDestinationOpened)
	if d := opened.Data; d.Sink != "down" || d.Key != "" || d.Reason == "" || !d.Since.Equal(r.Breakers[0].Since) {
		t.Errorf("opened event %+v, want sink down, no key, a reason and since %s", d, r.Breakers[0].Since)
	}
	eventually(t, 10*time.Second, "outbox_sink_circuit_state 1 on both relays", func() bool {
		return metricValue(t, servers, "outbox_sink_circuit_state", `sink="down"`) == 2
	})
	if n := metricValue(t, servers, "outbox_sink_circuit_opens_total", `sink="down"`); n != 1 {
		t.Errorf("outbox_sink_circuit_opens_total{sink=down} summed over the relays: %g, want 1", n)
	}
	if n := metricValue(t, servers, "outbox_sink_circuit_state", `sink="ops"`); n != 0 {
		t.Errorf("outbox_sink_circuit_state{sink=ops}: %g, want 0", n)
	}

	// The outage has outlasted the retry budget many times over; it ends
	// before the first probe (5 s after the opening), which then finds the
	// receiver up.
	downRequests, _ := down.counts()
	recovered := time.Now()
	if next := r.Breakers[0].NextProbe; recovered.After(next) {
		t.Logf("recovered %s after the first probe was due: the machine is slow", recovered.Sub(next))
	}
	// Probes taken so far found the receiver down: one on a slow machine,
	// or more on one so slow that the recovery comes after several.
	probesWhileDown := metricValue(t, servers, "outbox_sink_circuit_probes_total", `sink="down"`)
	down.answer(http.StatusOK)
	// On a slow machine the receiver may come back after the first probe
	// failed; the drain is then due at the next probe, which stats name.
	probe := recovered.Add(relay.DefaultProbeInterval)
	if b := e.report()["down"].Breakers; len(b) == 1 && b[0].NextProbe.After(recovered) {
		probe = b[0].NextProbe
	}
	eventually(t, 30*time.Second, "the poison messages dead and the healthy ones sent", func() bool {
		s := e.report()["ops"]
		return s.Dead == poison && s.Sent >= good
	})
	eventually(t, time.Until(probe)+20*time.Second, "every message of the down sink sent", func() bool {
		return e.report()["down"].Sent == messages
	})
	drained := time.Since(recovered)
	if most := probe.Sub(recovered) + 5*time.Second; drained > most {
		t.Errorf("drained %s after the recovery, want within %s: by the next probe (%s after it) and a margin", drained, most, probe.Sub(recovered).Round(time.Millisecond))
	}
	if byStatus, _, _ := e.rowCounts("down"); byStatus["dead"] != 0 || byStatus["sent"] != messages {
		t.Errorf("down sink's rows after the outage: %v, want all %d sent and none dead", byStatus, messages)
	}
	// Each relay: the failures that open its breaker and what it has in
	// flight meanwhile (every row, here), then one probe. Without the
	// breaker: every message max_attempts times.
	if most := messages + 2*relay.DefaultBreakerConsecutiveFailures + 2; downRequests > most {
		t.Errorf("%d requests to the down receiver, want at most %d (without a breaker: %d)", downRequests, most, messages*outageMaxAttempts)
	}
	byStatus, attempts, _ := e.rowCounts("ops")
	if byStatus["dead"] != poison || attempts != maxAttempts {
		t.Errorf("healthy sink's rows: %v, most attempts %d; want the %d poison ones dead at exactly max_attempts %d",
			byStatus, attempts, poison, maxAttempts)
	}

	eventually(t, 30*time.Second, "the closed event at the healthy sink", func() bool {
		_, ok := eventOf(healthy.events(t), status.EventDestinationClosed)
		return ok
	})
	closed, _ := eventOf(healthy.events(t), status.EventDestinationClosed)
	if d := closed.Data; d.Sink != "down" || d.Key != "" || d.Reason != opened.Data.Reason || !d.Since.Equal(opened.Data.Since) {
		t.Errorf("closed event %+v, want the opened one's sink, key, reason and since (%+v)", d, opened.Data)
	}
	if evs := healthy.events(t); len(evs) != 2 {
		t.Errorf("the healthy sink got %d breaker events, want the opening and the closing once each: %+v", len(evs), evs)
	}
	if evs := down.events(t); len(evs) != 0 {
		t.Errorf("the down receiver got its own breaker's events: %+v", evs)
	}
	if s := e.report()["down"]; s.Circuit != "closed" || len(s.Breakers) != 0 {
		t.Errorf("stats after the recovery: circuit %q, breakers %+v", s.Circuit, s.Breakers)
	}
	eventually(t, 10*time.Second, "outbox_sink_circuit_state 0 on both relays", func() bool {
		return metricValue(t, servers, "outbox_sink_circuit_state", `sink="down"`) == 0
	})
	// One probe after those that found the receiver down, or two when one
	// was on its way as the receiver came back (the count read before it
	// may not show it yet): never one per row or per relay.
	if n := metricValue(t, servers, "outbox_sink_circuit_probes_total", `sink="down"`); n < 1 || n > probesWhileDown+2 {
		t.Errorf("outbox_sink_circuit_probes_total{sink=down} summed over the relays: %g, want 1, or at most 2 after the %g that found the receiver down", n, probesWhileDown)
	}
	logs := servers[0].Logs() + servers[1].Logs()
	if n := strings.Count(logs, "circuit breaker opened"); n != 1 {
		t.Errorf("%d WARN lines of the opening, want 1", n)
	}
	if n := strings.Count(logs, "circuit breaker closed"); n != 1 {
		t.Errorf("%d INFO lines of the closing, want 1", n)
	}
	t.Logf("%d requests to the down receiver, drained %s after recovery", downRequests, drained.Round(time.Millisecond))
}

// TestServeRetryAfterZero: a receiver answering "429 Retry-After: 0" to
// everything, before two relays with the breaker's defaults. On 110b5e5
// this was thousands of requests a second, attempts never spent; now the
// repeated Retry-Afters open the breaker and the cluster sends one probe
// per probe interval: over several seconds the requests stay bounded, no
// row spends an attempt, dies or comes near its deferral budget (50; a
// row is deferred at most once per failure before the opening).
//
// Checked with the mutation "breaker.Classify returns Answered for a
// Retry-After": the breaker never opened (timed out waiting for it).
func TestServeRetryAfterZero(t *testing.T) {
	t.Parallel()
	rcv, e := oneSinkEnv(t, "storm", http.StatusTooManyRequests, "")
	rcv.retryAfter = "0"
	e.serve()
	e.serve()
	const messages = 20
	for i := range messages {
		e.mustRun("enqueue", "--sink", "storm", "--key", fmt.Sprintf("s-%d", i), "--text", "hello")
	}
	eventually(t, 30*time.Second, "the breaker to open", func() bool { return e.report()["storm"].Circuit != "closed" })
	opened, _ := rcv.counts()
	// Watch past the first probe (5 s after the opening): one request.
	eventually(t, 2*relay.DefaultProbeInterval+10*time.Second, "the first probe", func() bool {
		s := e.report()["storm"]
		return len(s.Breakers) == 1 && s.Breakers[0].Probes >= 1 && s.Breakers[0].State == "open"
	})
	requests, _ := rcv.counts()
	// Before the opening, each relay: a handful of Retry-Afters and what
	// it had in flight (every row); after it, the probe.
	if most := messages + 2*relay.DefaultBreakerConsecutiveFailures + 2; requests > most {
		t.Errorf("%d requests (%d before the breaker opened), want at most %d", requests, opened, most)
	}
	// The probe's row is in progress until its outcome is written (a
	// loaded CI run read it in flight).
	var byStatus map[string]int
	var attempts, deferrals int
	eventually(t, 10*time.Second, "the probe's outcome written", func() bool {
		byStatus, attempts, deferrals = e.rowCounts("storm")
		return byStatus["in_progress"] == 0
	})
	// Retry-After 0 makes a row due at once, so until the breaker opens
	// the relays may claim the same row again after each answer: at most
	// the failures that open it, on each relay (a CI run saw 4), far from
	// the budget of relay.DefaultMaxDeferrals.
	if most := 2 * relay.DefaultBreakerConsecutiveFailures; byStatus["pending"] != messages || attempts != 0 || deferrals > most {
		t.Errorf("rows %v, most attempts %d, most deferrals %d: want all %d pending, no attempt spent, at most %d deferrals",
			byStatus, attempts, deferrals, messages, most)
	}
	t.Logf("%d requests, %d before the breaker opened; most deferrals of a row %d", requests, opened, deferrals)
}

// TestServeRateSlowerThanTheLease: a rate limit of one delivery per 3 s
// with a lease of 2 s, on two relays: every message is sent with its
// first attempt, at the limit, none dead. (On 110b5e5 rows parked for
// their permit past their lease were re-claimed until they died.)
//
// Checked with the mutation "holdWindow is 100 leases" (claimed rows wait
// for their permits past their lease): the messages were not all sent in
// time. And with the rate_limit left out: the 4 arrivals spanned less than
// the limit allows.
func TestServeRateSlowerThanTheLease(t *testing.T) {
	t.Parallel()
	rcv, e := oneSinkEnv(t, "slow", http.StatusOK, "    rate_limit: {rate: 1, per: 3s}\n", "OUTBOXD_RELAY_LEASE=2s")
	// Every message waits before the relays start, and the pace is read off
	// the receiver's arrivals: timed from the test's side, a slow enqueue on
	// a loaded machine overlapped the deliveries and read as too fast.
	const messages = 4
	for i := range messages {
		e.mustRun("enqueue", "--sink", "slow", "--key", fmt.Sprintf("r-%d", i), "--text", "hello")
	}
	e.serve()
	e.serve()
	eventually(t, messages*3*time.Second+20*time.Second, "every message sent", func() bool {
		_, accepted := rcv.counts()
		return accepted == messages
	})
	took := rcv.acceptedSpan()
	eventually(t, 10*time.Second, "every row marked sent", func() bool { return e.report()["slow"].Sent == messages })
	byStatus, attempts, _ := e.rowCounts("slow")
	if byStatus["sent"] != messages || attempts != 1 {
		t.Errorf("rows %v, most attempts %d: want all %d sent with their first attempt", byStatus, attempts, messages)
	}
	if requests, _ := rcv.counts(); requests != messages {
		t.Errorf("%d requests for %d messages", requests, messages)
	}
	// At the limit: the first at once, then one per 3 s.
	if least := (messages - 1) * 3 * time.Second * 3 / 4; took < least {
		t.Errorf("%d messages took %s, faster than the limit allows (%s)", messages, took, least)
	}
}

// TestServeResumeDuringListenerReconnect: a sink paused by hand (stats
// says so beside its breaker state) with a row waiting, on two relays
// polling only every 30 s; both relays' LISTEN connections are killed and
// the sink resumed through the HTTP API at once, so the resume's
// notification reaches neither. The reconnecting listeners reload the
// pauses: the row is delivered within seconds, not after a poll interval.
//
// Checked with the mutation "listenOnce does not reload the pauses once
// (re)connected": the row waited for the 30 s poll; the test timed out.
func TestServeResumeDuringListenerReconnect(t *testing.T) {
	t.Parallel()
	rcv, e := oneSinkEnv(t, "held", http.StatusOK, "", "OUTBOXD_RELAY_POLL_INTERVAL=30s")
	e.mustRun("sinks", "pause", "held", "--by", "alice")
	if table := e.mustRun("stats"); !strings.Contains(table, "by hand (alice) until resumed") {
		t.Errorf("stats does not show the pause by hand:\n%s", table)
	}
	if s := e.report()["held"]; s.Pause == nil || !s.Pause.ByHand || !s.Pause.UntilResumed || s.Pause.ChangedBy != "alice" || s.Circuit != "closed" {
		t.Errorf("stats --json of the paused sink: %+v", s)
	}
	servers := []*server{e.serve(), e.serve()}
	listeners := func() int {
		var n int
		if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'outboxd-listener' "+
			"AND state = 'idle' AND strpos(query, $1) > 0", e.schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, 30*time.Second, "both relays listening", func() bool { return listeners() == 2 })
	e.mustRun("enqueue", "--sink", "held", "--key", "h-1", "--text", "after the resume")

	var killed int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "+
		"WHERE application_name = 'outboxd-listener' AND strpos(query, $1) > 0", e.schema).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "POST", servers[0].url("/v1/sinks/held/resume"), "", `{"by":"bob"}`); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, body)
	}
	resumed := time.Now()
	if killed != 2 {
		t.Fatalf("killed %d LISTEN backends, want the two relays'", killed)
	}
	// Well within the 30 s poll interval: the listener reconnects after
	// 100 ms; the rest is margin for a loaded machine.
	eventually(t, 10*time.Second, "the row delivered after the resume", func() bool {
		_, accepted := rcv.counts()
		return accepted == 1
	})
	t.Logf("delivered %s after the resume", time.Since(resumed).Round(time.Millisecond))
}

// TestServeResumeClosesTheBreaker: an operator's resume (the HTTP API's;
// the CLI's and the console's call the same operator.ResumeSink) closes
// an open breaker at once: the closed event goes through the routes, the
// serve that did it logs one INFO line, and the rows are delivered
// without waiting for the probe.
//
// Checked with the mutations "operator.ResumeSink publishes under a type
// no route matches" (no closed event: timed out) and "Resumed.LogClosed
// logs at DEBUG" (0 INFO lines).
func TestServeResumeClosesTheBreaker(t *testing.T) {
	t.Parallel()
	down, ops := newFlakyReceiver(t, http.StatusBadGateway), newFlakyReceiver(t, http.StatusOK)
	routes := "routes:\n  breaker-news:\n    events: [outboxd.destination.*]\n    to: [ops]\n"
	e := newEnv(t, sinkYAML("down", down.URL, outageMaxAttempts, "")+sinkYAML("ops", ops.URL, 3, ""), routes)
	e.mustRun("migrate")
	srv := e.serve()
	const messages = 10
	for i := range messages {
		e.mustRun("enqueue", "--sink", "down", "--key", fmt.Sprintf("d-%d", i), "--text", "hello")
	}
	eventually(t, 30*time.Second, "the breaker to open", func() bool { return e.report()["down"].Circuit == "open" })
	down.answer(http.StatusOK)
	if code, body := call(t, "POST", srv.url("/v1/sinks/down/resume"), "", `{"by":"carol"}`); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, body)
	}
	resumed := time.Now()
	eventually(t, 10*time.Second, "the closed event at the ops sink", func() bool {
		_, ok := eventOf(ops.events(t), status.EventDestinationClosed)
		return ok
	})
	closed, _ := eventOf(ops.events(t), status.EventDestinationClosed)
	opened, _ := eventOf(ops.events(t), status.EventDestinationOpened)
	if closed.Data.Sink != "down" || !closed.Data.Since.Equal(opened.Data.Since) || closed.Data.Reason == "" {
		t.Errorf("closed event %+v, opened %+v", closed.Data, opened.Data)
	}
	eventually(t, relay.DefaultProbeInterval, "the rows delivered before any probe", func() bool {
		_, accepted := down.counts()
		return accepted == messages
	})
	if since := time.Since(resumed); since >= relay.DefaultProbeInterval {
		t.Errorf("delivered %s after the resume: waited for a probe", since)
	}
	if n := strings.Count(srv.Logs(), "circuit breaker closed by hand"); n != 1 {
		t.Errorf("%d INFO lines of the closing by hand, want 1:\n%s", n, srv.Logs())
	}
	if out := e.mustRun("sinks", "resume", "down"); !strings.Contains(out, "down was not paused") {
		t.Errorf("a second resume printed %q", out)
	}
}
