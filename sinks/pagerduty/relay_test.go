package pagerduty_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks/pagerduty"
	"github.com/outboxd/outboxd/sinks/pagerduty/fakepagerduty"
)

// relayDeadline bounds how long a relay test waits for deliveries: rows
// are spaced by the default rate limit (two a second) and a retry's
// backoff, on a loaded machine.
const relayDeadline = 60 * time.Second

// quickBackoff retries a failed attempt soon, so the tests wait little.
var quickBackoff = relay.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}

// A real relay delivers the trigger, acknowledge and resolve of one
// ordering key, and another key's trigger, to the fake PagerDuty, whose
// first answer is a 500: the first key makes exactly one incident that
// took one trigger, one acknowledge and one resolve and ends resolved, the
// other key one open incident with one trigger, and each row's receipt
// names its incident's key.
// Mutation: dedupKey using the delivery id even with an ordering key
// fails this test (the acknowledge and resolve rows go dead, the first
// key's trigger has an incident of its own); so does the relay delivering
// an ordering key's rows out of order (the acknowledge finds no incident).
func TestRelayDrivesOneIncidentPerOrderingKey(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	f := newFake(t)
	f.Fail(http.StatusInternalServerError) // the first attempt, whichever row, is retried
	rows := []outboxd.Message{
		{Sink: "oncall", DedupKey: "db-1-opened", OrderingKey: "incident/db-1", Payload: json.RawMessage(`{"summary": "db-1 disk full", "severity": "critical"}`)},
		{Sink: "oncall", DedupKey: "db-2-opened", OrderingKey: "incident/db-2", Payload: json.RawMessage(`{"summary": "db-2 replica lag"}`)},
		{Sink: "oncall", DedupKey: "db-1-acked", OrderingKey: "incident/db-1", Payload: json.RawMessage(`{"event_action": "acknowledge"}`)},
		{Sink: "oncall", DedupKey: "db-1-resolved", OrderingKey: "incident/db-1", Payload: json.RawMessage(`{"event_action": "resolve"}`)},
	}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.EnqueueBatch(t.Context(), tx, rows); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
		Sinks:        []relay.SinkConfig{{Name: "oncall", Type: pagerduty.Type.Name, Sink: to(t, "oncall", f), Backoff: quickBackoff}},
		PollInterval: 50 * time.Millisecond,
	})
	signals.WaitWritten(t, relayDeadline, "oncall", "sent", len(rows))

	incidents := map[string]fakepagerduty.Incident{}
	for _, in := range f.Incidents(fakepagerduty.RoutingKey) {
		if _, twice := incidents[in.DedupKey]; twice {
			t.Errorf("a second incident under %s", in.DedupKey)
		}
		incidents[in.DedupKey] = in
	}
	checkIncident(t, incidents["incident/db-1"], fakepagerduty.Resolved, 1, 1, 1)
	checkIncident(t, incidents["incident/db-2"], fakepagerduty.Triggered, 1, 0, 0)
	if len(incidents) != 2 {
		t.Errorf("%d incidents, want 2", len(incidents))
	}
	for _, m := range rows {
		var key string
		err := pool.QueryRow(t.Context(), "SELECT receipt->>'dedup_key' FROM "+ob.Schema()+".messages_all WHERE sink = $1 AND dedup_key = $2",
			m.Sink, m.DedupKey).Scan(&key)
		if err != nil || key != m.OrderingKey {
			t.Errorf("row %s: receipt dedup_key %q (%v), want %s", m.DedupKey, key, err, m.OrderingKey)
		}
	}
}

// checkIncident checks an incident's status and how many triggers,
// acknowledges and resolves it took.
func checkIncident(t *testing.T, in fakepagerduty.Incident, status string, triggers, acks, resolves int) {
	t.Helper()
	got := [3]int{in.Count(pagerduty.ActionTrigger), in.Count(pagerduty.ActionAcknowledge), in.Count(pagerduty.ActionResolve)}
	if in.Status != status || got != [3]int{triggers, acks, resolves} {
		t.Errorf("incident %q: %s with %v triggers/acknowledges/resolves, want %s with %v", in.DedupKey, in.Status, got, status, [3]int{triggers, acks, resolves})
	}
}

// Events published through routes render into the sink's shape: an
// incident's opened, acknowledged and resolved events, published with its
// ordering key, drive one PagerDuty incident; the opened event's data
// fills the trigger's summary and custom_details.
// Mutation: Shape without event_action (the routes fail to compile) or
// without custom_details fails this test.
func TestRoutedEventsDriveOneIncident(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	f := newFake(t)
	pd := to(t, "oncall", f)
	cfg, ps := routing.Parse(map[string]any{
		"opened": map[string]any{"events": []any{"incident.opened"}, "to": []any{map[string]any{"sink": "oncall",
			"template": map[string]any{"summary": "{{.data.title}}", "severity": "critical", "custom_details": "{{json .data}}"}}}},
		"acknowledged": map[string]any{"events": []any{"incident.acknowledged"}, "to": []any{map[string]any{"sink": "oncall",
			"template": map[string]any{"event_action": "acknowledge"}}}},
		"resolved": map[string]any{"events": []any{"incident.resolved"}, "to": []any{map[string]any{"sink": "oncall",
			"template": map[string]any{"event_action": "resolve"}}}},
	}, "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{"oncall": pd})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(t.Context(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"incident.opened", "incident.acknowledged", "incident.resolved"} {
		ev := outboxd.Event{Type: typ, Key: "7", OrderingKey: "incident-7", Data: map[string]any{"title": "checkout is down"}}
		if _, err := ob.Publish(t.Context(), pool, ev); err != nil {
			t.Fatal(err)
		}
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{PollInterval: 50 * time.Millisecond, Stage: table.Stage(ob.Routes().Fallback(pool)),
		Sinks: []relay.SinkConfig{{Name: "oncall", Sink: pd, Backoff: quickBackoff}}})
	signals.WaitWritten(t, relayDeadline, "oncall", "sent", 3)

	incidents := f.Incidents(fakepagerduty.RoutingKey)
	if len(incidents) != 1 {
		t.Fatalf("%d incidents, want 1: %+v", len(incidents), incidents)
	}
	checkIncident(t, incidents[0], fakepagerduty.Resolved, 1, 1, 1)
	trigger := incidents[0].Events[0].Payload
	if trigger.Summary != "checkout is down" || string(trigger.CustomDetails) != `{"title":"checkout is down"}` {
		t.Errorf("trigger payload %+v, want the event's title and data", trigger)
	}
}
