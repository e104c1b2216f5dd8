package fakepagerduty_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/sinks/pagerduty/fakepagerduty"
)

// post sends body to f and returns the status and the Retry-After header.
func post(t *testing.T, f *fakepagerduty.Server, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(f.URL(), "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// event is an event of the fake's routing key with the given fields
// (JSON members) added.
func event(fields string) string {
	return `{"routing_key": "` + fakepagerduty.RoutingKey + `"` + fields + `}`
}

// The fake refuses with 400 what PagerDuty documents as an invalid event,
// whatever sends it; the sink's own tests cannot show every rule, since the
// sink refuses some of these inputs before sending.
// Mutation: dropping the severity check in checkTrigger fails its case.
func TestTheFakeRefusesInvalidEvents(t *testing.T) {
	t.Parallel()
	trigger := func(payload string) string { return event(`, "event_action": "trigger", "payload": ` + payload) }
	for name, body := range map[string]string{
		"not JSON":              `disk full`,
		"no routing key":        `{"event_action": "trigger", "payload": {"summary": "s", "source": "h", "severity": "info"}}`,
		"unknown action":        event(`, "event_action": "escalate", "dedup_key": "k"`),
		"acknowledge, no key":   event(`, "event_action": "acknowledge"`),
		"dedup key too long":    event(`, "event_action": "resolve", "dedup_key": "` + strings.Repeat("k", 256) + `"`),
		"trigger, no payload":   event(`, "event_action": "trigger"`),
		"no summary":            trigger(`{"source": "h", "severity": "info"}`),
		"summary of 1025":       trigger(`{"summary": "` + strings.Repeat("s", 1025) + `", "source": "h", "severity": "info"}`),
		"no source":             trigger(`{"summary": "s", "severity": "info"}`),
		"severity not in enum":  trigger(`{"summary": "s", "source": "h", "severity": "fatal"}`),
		"timestamp not ISO8601": trigger(`{"summary": "s", "source": "h", "severity": "info", "timestamp": "now"}`),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := fakepagerduty.New()
			defer f.Close()
			if status, _ := post(t, f, body); status != http.StatusBadRequest {
				t.Errorf("answered %d, want 400", status)
			}
			if len(f.Events()) != 0 {
				t.Error("an invalid event was accepted")
			}
		})
	}
}

// Events act on incidents as PagerDuty's do: a summary of exactly 1024
// characters is taken, a trigger on an open incident is de-duplicated, an
// acknowledge or a resolve of a key without an open incident is accepted
// and changes nothing, and a trigger after the resolve opens a new one.
func TestTheFakeKeepsIncidentsByDedupKey(t *testing.T) {
	t.Parallel()
	f := fakepagerduty.New()
	defer f.Close()
	trigger := event(`, "event_action": "trigger", "dedup_key": "k", "payload": {"summary": "` + strings.Repeat("s", 1024) + `", "source": "h", "severity": "info"}`)
	for _, body := range []string{
		event(`, "event_action": "acknowledge", "dedup_key": "k"`), // no incident yet: ignored
		trigger, trigger,
		event(`, "event_action": "resolve", "dedup_key": "k"`),
		trigger,
	} {
		if status, _ := post(t, f, body); status != http.StatusAccepted {
			t.Fatalf("answered %d, want 202", status)
		}
	}
	var outcomes []string
	for _, ev := range f.Events() {
		outcomes = append(outcomes, ev.Outcome)
	}
	want := []string{fakepagerduty.Ignored, fakepagerduty.Opened, fakepagerduty.Deduplicated, fakepagerduty.Changed, fakepagerduty.Opened}
	if got, _ := json.Marshal(outcomes); string(got) != mustJSON(want) {
		t.Errorf("outcomes %s, want %s", got, mustJSON(want))
	}
	incidents := f.Incidents(fakepagerduty.RoutingKey)
	if len(incidents) != 2 || incidents[0].Status != fakepagerduty.Resolved || incidents[1].Status != fakepagerduty.Triggered {
		t.Errorf("incidents %+v, want a resolved one and a new triggered one", incidents)
	}
}

// Beyond its limit a routing key gets 429 without Retry-After, as from
// PagerDuty, and another routing key is not held back.
// Mutation: counting events across routing keys fails this test.
func TestTheFakeLimitsEachRoutingKey(t *testing.T) {
	t.Parallel()
	f := fakepagerduty.New()
	defer f.Close()
	f.SetLimit(1, time.Hour)
	resolve := `, "event_action": "resolve", "dedup_key": "k"`
	if status, _ := post(t, f, event(resolve)); status != http.StatusAccepted {
		t.Fatalf("first event: %d", status)
	}
	status, retryAfter := post(t, f, event(resolve))
	if status != http.StatusTooManyRequests || retryAfter != "" {
		t.Errorf("over the limit: %d with Retry-After %q, want 429 without", status, retryAfter)
	}
	other := `{"routing_key": "` + strings.Repeat("X", 32) + `"` + resolve + `}`
	if status, _ := post(t, f, other); status != http.StatusAccepted {
		t.Errorf("another routing key: %d, want 202", status)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
