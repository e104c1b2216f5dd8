package pagerduty_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/pagerduty"
	"github.com/outboxd/outboxd/sinks/pagerduty/fakepagerduty"
)

// A trigger, an acknowledge and a resolve of one ordering key land on one
// incident, which ends resolved; each receipt names the key.
// Mutation: dedupKey ignoring the ordering key (the delivery id always)
// fails this test: the acknowledge is refused, and each trigger would open
// an incident of its own.
func TestOneOrderingKeyIsOneIncident(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	s := to(t, "oncall", f)
	for i, payload := range []string{
		`{"summary": "db-1 disk full", "severity": "critical", "custom_details": {"free": "0 B"}}`,
		`{"event_action": "acknowledge"}`,
		`{"event_action": "resolve"}`,
	} {
		d := delivery(int64(i+1), "oncall", "row-"+string(rune('a'+i)), "incident/db-1", payload)
		if err := deliver(t, s, d); err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
		if got := receipt(t, d)["dedup_key"]; got != "incident/db-1" {
			t.Errorf("row %d: receipt dedup_key %q, want the ordering key", i+1, got)
		}
	}
	incidents := f.Incidents(fakepagerduty.RoutingKey)
	if len(incidents) != 1 {
		t.Fatalf("%d incidents, want 1: %+v", len(incidents), incidents)
	}
	in := incidents[0]
	if in.Status != fakepagerduty.Resolved || in.Summary != "db-1 disk full" {
		t.Errorf("incident %s %q, want resolved %q", in.Status, in.Summary, "db-1 disk full")
	}
	for _, action := range []string{pagerduty.ActionTrigger, pagerduty.ActionAcknowledge, pagerduty.ActionResolve} {
		if n := in.Count(action); n != 1 {
			t.Errorf("%d events %s, want 1", n, action)
		}
	}
	trigger := in.Events[0]
	if trigger.Payload.Source != pagerduty.DefaultSource || trigger.Payload.Severity != pagerduty.SeverityCritical ||
		string(trigger.Payload.CustomDetails) != `{"free":"0 B"}` {
		t.Errorf("trigger payload %+v", trigger.Payload)
	}
}

// A trigger sent twice (a retry after an attempt whose answer was lost)
// carries one dedup key, the delivery id when the row has no ordering
// key, so PagerDuty adds the second to the open incident.
// Mutation: a dedup key that changes per attempt (d.Attempt in it) opens
// two incidents.
func TestARetriedTriggerIsDeduplicated(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	s := to(t, "oncall", f)
	for attempt := 1; attempt <= 2; attempt++ {
		d := delivery(7, "oncall", "deploy-42", "", `{"summary": "deploy 42 failed"}`)
		d.Attempt, d.Uncertain = attempt, attempt > 1
		if err := deliver(t, s, d); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	incidents := f.Incidents(fakepagerduty.RoutingKey)
	if len(incidents) != 1 || incidents[0].DedupKey != "oncall/deploy-42" || incidents[0].Count(pagerduty.ActionTrigger) != 2 {
		t.Fatalf("incidents %+v, want one under oncall/deploy-42 with both triggers", incidents)
	}
	if got := f.Events()[1].Outcome; got != fakepagerduty.Deduplicated {
		t.Errorf("second trigger %s, want %s", got, fakepagerduty.Deduplicated)
	}
}

// Beyond the routing key's limit PagerDuty answers 429 without
// Retry-After: the sink pauses for DefaultRetryAfter, no attempt spent.
// Mutation: classify returning sinks.ClassifyResponse's error alone (a
// plain retry) fails this test.
func TestTheRoutingKeysLimitPausesTheSink(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.SetLimit(2, time.Hour)
	s := to(t, "oncall", f)
	for i := range 2 {
		if err := deliver(t, s, delivery(int64(i), "oncall", "k"+string(rune('0'+i)), "", `{"summary": "x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	err := deliver(t, s, delivery(3, "oncall", "k3", "", `{"summary": "x"}`))
	if d, ok := sink.RetryAfterDelay(err); !ok || d != pagerduty.DefaultRetryAfter {
		t.Fatalf("over the limit: %v (delay %s, %v), want a pause of %s", err, d, ok, pagerduty.DefaultRetryAfter)
	}
	reqs := f.Requests()
	if last := reqs[len(reqs)-1]; last.Status != http.StatusTooManyRequests {
		t.Errorf("the fake answered %d, want 429", last.Status)
	}
	if len(f.Events()) != 2 {
		t.Errorf("%d events accepted, want 2", len(f.Events()))
	}
}

// A 429 that does carry Retry-After (a proxy in front of PagerDuty) is
// honoured to the second.
// Mutation: classify pausing DefaultRetryAfter whatever the header says
// fails this test.
func TestARetryAfterHeaderIsHonoured(t *testing.T) {
	t.Parallel()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(proxy.Close)
	s := build(t, "oncall", map[string]any{"routing_key": fakepagerduty.RoutingKey, "events_url": proxy.URL})
	err := deliver(t, s, delivery(1, "oncall", "k", "", `{"summary": "x"}`))
	if d, ok := sink.RetryAfterDelay(err); !ok || d != 7*time.Second {
		t.Fatalf("%v (delay %s), want a pause of 7s", err, d)
	}
}

// 5xx is retried: neither permanent nor a pause.
// Mutation: classify treating every non-2xx as permanent fails this test.
func TestServerErrorsAreRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.Fail(http.StatusInternalServerError)
	s := to(t, "oncall", f)
	d := delivery(1, "oncall", "k", "", `{"summary": "x"}`)
	err := deliver(t, s, d)
	if _, paused := sink.RetryAfterDelay(err); err == nil || sink.IsPermanent(err) || paused {
		t.Fatalf("after a 500: %v, want a plain retryable error", err)
	}
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("the retry: %v", err)
	}
}

// What PagerDuty refuses, or the sink cannot send, fails permanently with
// an error that says why; what the sink can tell alone is never sent.
// Mutation: dropping the acknowledge check (sending the delivery id as the
// key) makes its case reach the fake, and the test fails on the request
// count; classify mapping 400 to a retry fails the fake-refused cases.
func TestRefusedInputIsPermanent(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", 300)
	for _, tc := range []struct {
		name, routingKey, orderingKey, payload, want string
		reachesFake                                  bool
	}{
		{name: "image without src", payload: `{"summary": "x", "images": [{"alt": "graph"}]}`, want: "images[0].src is required", reachesFake: true},
		{name: "link without href", payload: `{"summary": "x", "links": [{"text": "runbook"}]}`, want: "links[0].href is required", reachesFake: true},
		{name: "timestamp not ISO 8601", payload: `{"summary": "x", "timestamp": "yesterday"}`, want: "payload.timestamp", reachesFake: true},
		{name: "routing key PagerDuty does not take", routingKey: "short", payload: `{"summary": "x"}`, want: "routing_key must be 32 characters", reachesFake: true},
		{name: "acknowledge without a key", payload: `{"event_action": "acknowledge"}`, want: "needs the incident's dedup_key"},
		{name: "resolve without a key", payload: `{"event_action": "resolve"}`, want: "needs the incident's dedup_key"},
		{name: "unknown action", orderingKey: "db-1", payload: `{"event_action": "escalate"}`, want: `event_action "escalate"`},
		{name: "trigger without summary", payload: `{"severity": "info"}`, want: "a trigger needs a summary"},
		{name: "severity outside the enum", payload: `{"summary": "x", "severity": "fatal"}`, want: `severity "fatal"`},
		{name: "unknown field", payload: `{"summary": "x", "colour": "red"}`, want: `unknown field "colour"`},
		{name: "not an object", payload: `"disk full"`, want: "payload: want"},
		{name: "ordering key too long is hashed, not refused", orderingKey: long, payload: `{"summary": "x"}`, reachesFake: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			key := tc.routingKey
			if key == "" {
				key = fakepagerduty.RoutingKey
			}
			s := build(t, "oncall", map[string]any{"routing_key": key, "events_url": f.URL()})
			err := deliver(t, s, delivery(1, "oncall", "k", tc.orderingKey, tc.payload))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if !sink.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a permanent one saying %q", err, tc.want)
			}
			if got := len(f.Requests()); (got > 0) != tc.reachesFake {
				t.Errorf("%d requests reached PagerDuty, want some: %v", got, tc.reachesFake)
			}
			if tc.orderingKey == long {
				// Mutation: sending the key uncut gets the fake's 400.
				if evs := f.Events(); len(evs) != 1 || !strings.HasPrefix(evs[0].DedupKey, "sha256:") {
					t.Errorf("events %+v, want one under the key's hash", evs)
				}
			}
			if err != nil && strings.Contains(err.Error(), fakepagerduty.RoutingKey) {
				t.Errorf("the error shows the routing key: %v", err)
			}
		})
	}
}

// A summary longer than PagerDuty's 1024 characters is cut to fit, not
// refused: the page goes out.
// Mutation: sending the summary uncut gets the fake's 400 and fails this
// test.
func TestALongSummaryIsCut(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	s := to(t, "oncall", f)
	summary := strings.Repeat("é", 3000)
	if err := deliver(t, s, delivery(1, "oncall", "k", "", `{"summary": "`+summary+`"}`)); err != nil {
		t.Fatal(err)
	}
	got := f.Incidents(fakepagerduty.RoutingKey)[0].Summary
	if utf8.RuneCountInString(got) != pagerduty.MaxSummary || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("summary of %d characters ending %q, want %d ending with an ellipsis", utf8.RuneCountInString(got), got[len(got)-8:], pagerduty.MaxSummary)
	}
}

// PagerDuty accepts an acknowledge or a resolve whose key has no open
// incident and changes nothing: the row is delivered, the fake shows it
// ignored. (What a resolve delivered before its trigger does; rows of one
// ordering key are delivered in order, so only a redrive does that.)
func TestAResolveWithoutAnIncidentChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	s := to(t, "oncall", f)
	if err := deliver(t, s, delivery(1, "oncall", "k", "db-9", `{"event_action": "resolve"}`)); err != nil {
		t.Fatal(err)
	}
	if evs := f.Events(); len(evs) != 1 || evs[0].Outcome != fakepagerduty.Ignored || len(f.Incidents(fakepagerduty.RoutingKey)) != 0 {
		t.Fatalf("events %+v, want one ignored resolve and no incident", evs)
	}
}
