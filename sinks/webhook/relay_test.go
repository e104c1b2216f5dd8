package webhook_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
)

// relayDeadline bounds how long the integration test waits for deliveries.
const relayDeadline = 30 * time.Second

// TestRelayDeliversThroughWebhook runs the real relay on a fresh outbox with
// the webhook sink in front of a verifying receiver: every committed message
// arrives once, byte for byte, under webhook-id = its delivery id
// ("hook/<dedup key>"; it was the bare dedup key before), with a
// valid signature; the rolled-back one never arrives.
func TestRelayDeliversThroughWebhook(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	rc := newReceiver(t, accept)
	sink := build(t, map[string]any{"url": rc.URL, "secret": secretA, "allow_private": true})
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
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
		if _, err := ob.Enqueue(t.Context(), tx, outboxd.Message{Sink: "hook", DedupKey: key, Payload: json.RawMessage(want[key])}); err != nil {
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
	if _, err := ob.Enqueue(t.Context(), rolledBack, outboxd.Message{Sink: "hook", DedupKey: "rolled-back", Payload: json.RawMessage(`{}`)}); err != nil {
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
		reqs := got["hook/"+key]
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

// One event routed to two webhook sinks that post to the same receiver,
// which de-duplicates on webhook-id as Standard Webhooks tells it to: both
// rows share their dedup key (type/key/route), yet each arrives under an
// id of its own, and a retry carries the same id as its first attempt.
// (On main webhook-id was the dedup key, and the receiver dropped one of
// the two. Mutation: Deliver sending d.DedupKey as webhook-id fails this
// test.)
func TestWebhookIDsAreUniqueAcrossRouteTargetsAndStableAcrossRetries(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	var mu sync.Mutex
	attempts := map[string]int{} // webhook-id -> requests
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("webhook-id")
		if attempts[id]++; attempts[id] == 1 {
			w.WriteHeader(http.StatusInternalServerError) // retried
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	opts := map[string]any{"url": rc.URL, "secret": secretA, "allow_private": true}
	a, b := build(t, opts), build(t, opts)
	cfg, ps := routing.Parse(map[string]any{"orders": map[string]any{"events": []any{"order.*"}, "to": []any{"hook-a", "hook-b"}}}, "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{"hook-a": a, "hook-b": b})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(t.Context(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Publish(t.Context(), pool, outboxd.Event{Type: "order.created", Key: "42"}); err != nil {
		t.Fatal(err)
	}
	backoff := relay.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{PollInterval: 50 * time.Millisecond, Stage: table.Stage(nil),
		Sinks: []relay.SinkConfig{{Name: "hook-a", Sink: a, Backoff: backoff}, {Name: "hook-b", Sink: b, Backoff: backoff}}})
	signals.WaitWritten(t, relayDeadline, "hook-a", "sent", 1)
	signals.WaitWritten(t, relayDeadline, "hook-b", "sent", 1)

	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"hook-a/order.created/42/orders": 2, "hook-b/order.created/42/orders": 2}
	if !maps.Equal(attempts, want) {
		t.Errorf("requests per webhook-id %v, want %v (two ids, each a failed attempt and its retry)", attempts, want)
	}
	for _, r := range rc.take() {
		if err := verify(secretA, r.header, r.body, time.Now()); err != nil {
			t.Errorf("webhook-id %s: %v", r.header.Get("webhook-id"), err)
		}
	}
}
