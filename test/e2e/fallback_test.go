package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
)

// fallbackRoutes routes alert.* to the webhook sink primary, which falls
// back to the webhook sink oncall after fallbackAfter (a duration or dead).
func fallbackRoutes(fallbackAfter string) string {
	return "routes:\n  alerts:\n    events: [alert.*]\n    to:\n      - sink: primary\n        fallback: oncall\n        fallback_after: " + fallbackAfter + "\n"
}

// publishAlerts publishes n alert.fired events with keys prefix-0...
func (e *env) publishAlerts(prefix string, n int) {
	e.t.Helper()
	for i := range n {
		if _, err := e.pool.Exec(e.t.Context(), "SELECT * FROM "+e.schema+".publish('alert.fired', $1, '{\"n\": 1}')",
			fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// lookup runs `outboxd get ID --json`.
func (e *env) lookup(id int64) operator.StoredMessage {
	e.t.Helper()
	var m operator.StoredMessage
	if err := json.Unmarshal([]byte(e.mustRun("get", strconv.FormatInt(id, 10), "--json")), &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// TestServeFallsBackWhileThePrimaryIsDown is issue 44's fallback run on
// two relays: the primary's receiver answers 503 past fallback_after, so
// every row published meanwhile reaches the fallback's receiver once and
// the primary's none; outboxd get names the fallback on both rows; once
// the receiver heals, a probe closes the breaker and later rows go to the
// primary again, none to the fallback.
//
// Checked with the mutation: fall_back.sql's sweep without its
// last_failure_at test (the rows published after the heal went to the
// fallback too, no probe had a row, and the breaker never closed: timed
// out).
func TestServeFallsBackWhileThePrimaryIsDown(t *testing.T) {
	t.Parallel()
	down := newFlakyReceiver(t, http.StatusServiceUnavailable)
	oncall := newReceiver(t)
	breaker := "    circuit_breaker: {consecutive_failures: 3, probe_interval: 300ms, max_probe_interval: 600ms}\n"
	e := newEnv(t, sinkYAML("primary", down.URL, outageMaxAttempts, breaker)+webhookSink("oncall", oncall), fallbackRoutes("1s"))
	e.mustRun("migrate")
	e.serve()
	e.serve()

	const outage, healed = 12, 6
	e.publishAlerts("outage", outage)
	eventually(t, 60*time.Second, "every outage row at the fallback", func() bool {
		distinct, _ := oncall.received()
		return distinct == outage
	})
	for i := range outage {
		id := fmt.Sprintf("alert.fired/outage-%d/alerts/fallback", i)
		if n := oncall.deliveries(id); n != 1 {
			t.Errorf("fallback receiver got %s %d times, want once", id, n)
		}
	}
	if _, accepted := down.counts(); accepted != 0 {
		t.Errorf("the primary's receiver accepted %d rows while down", accepted)
	}

	var original, standIn int64
	if err := e.pool.QueryRow(t.Context(), "SELECT h.id, (h.fallback->>'id')::bigint FROM "+e.schema+
		".messages_history h WHERE h.dedup_key = 'alert.fired/outage-0/alerts'").Scan(&original, &standIn); err != nil {
		t.Fatal(err)
	}
	if f := e.lookup(original).Fallback; f == nil || f.To != "oncall" || f.ID != standIn || f.Reason == "" {
		t.Errorf("get %d: fallback %+v, want to oncall, id %d and a reason", original, f, standIn)
	}
	if f := e.lookup(standIn).Fallback; f == nil || f.From != "primary" || f.Of != original || f.Reason == "" {
		t.Errorf("get %d: fallback %+v, want from primary, of %d and a reason", standIn, f, original)
	}

	// Healed: the rows published now go to exactly one receiver each (a
	// probe failed just before the heal may still hand some over), and a
	// probe closes the breaker.
	down.answer(http.StatusOK)
	e.publishAlerts("heal", healed)
	eventually(t, 60*time.Second, "the primary's breaker to close", func() bool { return e.report()["primary"].Circuit == "closed" })
	eventually(t, 60*time.Second, "every heal row delivered", func() bool {
		_, accepted := down.counts()
		distinct, _ := oncall.received()
		return accepted+distinct == outage+healed
	})
	// Closed: later rows go to the primary, none to the fallback.
	e.publishAlerts("after", healed)
	eventually(t, 60*time.Second, "the rows after the heal at the primary", func() bool {
		_, accepted := down.counts()
		distinct, _ := oncall.received()
		return accepted+distinct == outage+2*healed
	})
	for i := range healed {
		if n := oncall.deliveries(fmt.Sprintf("alert.fired/after-%d/alerts/fallback", i)); n != 0 {
			t.Errorf("row after-%d went to the fallback with the primary's breaker closed", i)
		}
	}
	if distinct, total := oncall.received(); distinct != total {
		t.Errorf("fallback receiver: %d deliveries of %d rows: a row delivered twice", total, distinct)
	}
}

// TestServeFallsBackInsteadOfDeadLettering: with fallback_after: dead, a
// row the primary refuses for good (400) goes to the fallback at once,
// once, and no dead letter is left.
//
// Checked with the mutation: relay.finish without its fallBackOnDead call
// (the rows were dead-lettered: timed out).
func TestServeFallsBackInsteadOfDeadLettering(t *testing.T) {
	t.Parallel()
	refusing := newFlakyReceiver(t, http.StatusBadRequest)
	oncall := newReceiver(t)
	e := newEnv(t, sinkYAML("primary", refusing.URL, 3, "")+webhookSink("oncall", oncall), fallbackRoutes("dead"))
	e.mustRun("migrate")
	e.serve()

	const rows = 5
	e.publishAlerts("refused", rows)
	eventually(t, 60*time.Second, "every refused row at the fallback", func() bool {
		distinct, _ := oncall.received()
		return distinct == rows
	})
	if distinct, total := oncall.received(); total != distinct {
		t.Errorf("fallback receiver: %d deliveries of %d rows", total, distinct)
	}
	if byStatus, _, _ := e.rowCounts("primary"); byStatus["dead"] != 0 {
		t.Errorf("primary rows by status %v: want no dead letter", byStatus)
	}
}
