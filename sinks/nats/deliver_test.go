package nats_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// delivery returns a delivery of a small JSON payload under key.
func delivery(key string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "events", DedupKey: key, Payload: json.RawMessage(`{"n":1}`), Attempt: 1, MaxAttempts: 10}
}

// TestPublishFailuresMapToOutcomes publishes into situations the server
// refuses, on the real server, and checks the outcome class of each.
func TestPublishFailuresMapToOutcomes(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	full := newStream(t, url)
	if _, err := full.js.UpdateStream(t.Context(), jetstream.StreamConfig{
		Name: full.name, Subjects: []string{full.name + ".>"}, MaxMsgs: 1, Discard: jetstream.DiscardNew, Duplicates: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	if err := build(t, "events", map[string]any{"url": url, "subject": full.subject}).Deliver(t.Context(), delivery("first")); err != nil {
		t.Fatalf("first message into the one-message stream: %v", err)
	}

	tests := []struct {
		name    string
		options map[string]any
		d       *sink.Delivery
		check   func(error) bool
		class   string
	}{
		{"no stream covers the subject", map[string]any{"url": url, "subject": "OUTBOXD_NO_SUCH_STREAM.x"}, delivery("a"), sink.IsPermanent, "permanent"},
		{"another stream than the expected one", map[string]any{"url": url, "subject": st.subject, "stream": full.name}, delivery("b"), sink.IsPermanent, "permanent"},
		{"subject template renders an empty token", map[string]any{"url": url, "subject": st.name + ".{{.OrderingKey}}"}, delivery("c"), sink.IsPermanent, "permanent"},
		{"payload over the server's max_payload", map[string]any{"url": url, "subject": st.subject},
			&sink.Delivery{DedupKey: "d", Payload: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)}, sink.IsPermanent, "permanent"},
		{"stream full (discard new)", map[string]any{"url": url, "subject": full.subject}, delivery("e"), isRetryAfter, "retry-after"},
	}
	for _, tt := range tests {
		err := build(t, "events", tt.options).Deliver(t.Context(), tt.d)
		if err == nil || !tt.check(err) {
			t.Errorf("%s: %v, want a %s error", tt.name, err, tt.class)
		}
	}
	if n := st.count(t); n != 0 {
		t.Errorf("the stream holds %d messages after refused publishes", n)
	}
}

func isRetryAfter(err error) bool {
	_, ok := sink.RetryAfterDelay(err)
	return ok
}

// An unreachable server is a retryable failure whose text names neither
// the password in the URL nor a token.
func TestUnreachableServerIsRetryableAndKeepsSecrets(t *testing.T) {
	t.Parallel()
	const password, token = "pa55-in-url", "t0ken-option"
	closed := "127.0.0.1:" + itoa(proc.FreePort(t))
	for _, options := range []map[string]any{
		{"url": "nats://user:" + password + "@" + closed, "subject": "x.y", "connect_timeout": "1s"},
		{"url": "nats://" + closed, "token": token, "subject": "x.y", "connect_timeout": "1s"},
	} {
		err := build(t, "events", options).Deliver(t.Context(), delivery("k"))
		if err == nil || sink.IsPermanent(err) {
			t.Fatalf("unreachable server: %v, want a retryable error", err)
		}
		if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), token) {
			t.Errorf("the error repeats a secret: %v", err)
		}
	}
}

// A redelivery of a message already in the stream is a success whose
// receipt says the stream dropped it as a duplicate.
func TestRedeliveryIsADuplicateForTheStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	sink := build(t, "events", map[string]any{"url": url, "subject": st.subject})
	for attempt := 1; attempt <= 2; attempt++ {
		d := delivery("same-key")
		if err := sink.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		var r natssink.Receipt
		if err := json.Unmarshal(d.Receipt(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Stream != st.name || r.Sequence != 1 || r.Duplicate != (attempt == 2) {
			t.Errorf("attempt %d: receipt %+v, want stream %s, seq 1, duplicate %v", attempt, r, st.name, attempt == 2)
		}
	}
	if n := st.count(t); n != 1 {
		t.Errorf("the stream holds %d messages, want 1", n)
	}
}

// DeliverBatch (the batch prototype) publishes every message of a batch
// under its own Nats-Msg-Id and reports a bad one on its own.
func TestDeliverBatchReportsEachOutcome(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	snk := build(t, "events", map[string]any{"url": url, "subject": st.name + `.{{or .OrderingKey "x"}}`, "max_in_flight": 8})
	ds := make([]*sink.Delivery, 20)
	for i := range ds {
		ds[i] = delivery(fmt.Sprintf("batch-%02d", i))
	}
	ds[7].OrderingKey = "bad key" // white space: no valid subject
	errs := snk.(*natssink.Sink).DeliverBatch(t.Context(), ds)
	for i, err := range errs {
		if (i == 7) != (err != nil) || (err != nil && !sink.IsPermanent(err)) {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	if n := st.count(t); n != 19 {
		t.Errorf("the stream holds %d messages, want 19", n)
	}
}
