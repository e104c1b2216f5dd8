package webhook_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testrelay"
)

// relayDeadline bounds how long the integration test waits for deliveries.
const relayDeadline = 30 * time.Second

// TestRelayDeliversThroughWebhook runs the real relay on a fresh outbox with
// the webhook sink in front of a verifying receiver: every committed message
// arrives once, byte for byte, under webhook-id = its dedup key, with a
// valid signature; the rolled-back one never arrives.
func TestRelayDeliversThroughWebhook(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	rc := newReceiver(t, accept)
	sink := build(t, map[string]any{"url": rc.URL, "secret": secretA, "allow_private": true})
	signals := testrelay.Run(t, pool, relay.Config{
		Schema:       ob.Schema(),
		Sinks:        []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: sink}},
		PollInterval: 50 * time.Millisecond,
	})

	// Payloads in the form PostgreSQL's jsonb column gives back (it
	// normalises spacing and key order), so the bytes must match exactly.
	want := map[string]string{}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		key := fmt.Sprintf("order-%02d", i)
		want[key] = fmt.Sprintf(`{"n": %d, "note": "héllo ✓ \"quoted\"", "items": [1, 2, 3]}`, i)
		if _, err := ob.Enqueue(t.Context(), tx, core.Message{Sink: "hook", DedupKey: key, Payload: json.RawMessage(want[key])}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	rolledBack, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Enqueue(t.Context(), rolledBack, core.Message{Sink: "hook", DedupKey: "rolled-back", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := rolledBack.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}

	signals.WaitWritten(t, relayDeadline, "hook", "sent", len(want))
	stats, err := ob.Stats(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if sent := stats["hook"].Sent; sent != int64(len(want)) {
		t.Fatalf("%d rows sent, want %d", sent, len(want))
	}
	got := map[string][]request{}
	for _, r := range rc.take() {
		id := r.header.Get("webhook-id")
		got[id] = append(got[id], r)
	}
	if len(got) != len(want) {
		t.Errorf("received %d distinct ids, want %d", len(got), len(want))
	}
	for key, payload := range want {
		reqs := got[key]
		if len(reqs) != 1 {
			t.Errorf("%s: received %d times, want once", key, len(reqs))
			continue
		}
		if string(reqs[0].body) != payload {
			t.Errorf("%s: body %s, want %s", key, reqs[0].body, payload)
		}
		if err := verify(secretA, reqs[0].header, reqs[0].body, time.Now()); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	if _, ok := got["rolled-back"]; ok {
		t.Error("a rolled-back message was delivered")
	}
}
