package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// deliveryTimeout bounds the wait for the relay's deliveries.
const deliveryTimeout = 30 * time.Second

func secret(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

// TestVerifiedHandlerAcceptsTheSinksDeliveries runs the real relay and
// webhook sink against verifiedHandler: a delivery signed with the
// receiver's secret is verified and handled; one signed with another
// secret is refused with 401 and becomes a dead letter, never handled.
func TestVerifiedHandlerAcceptsTheSinksDeliveries(t *testing.T) {
	pool, ob := testdb.New(t)
	receiverSecret := secret("receiver-secret-of-32-bytes-long")
	var (
		mu      sync.Mutex
		handled []Delivery
	)
	h, err := verifiedHandler(receiverSecret, func(d Delivery) {
		mu.Lock()
		handled = append(handled, d)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var sinks []relay.SinkConfig
	for name, signWith := range map[string][]string{
		"rotating": {secret("the-new-secret-of-32-bytes-long!"), receiverSecret}, // new and old during a rotation
		"wrong":    {secret("somebody-else-s-32-bytes-secret!")},
	} {
		s, err := webhook.Type.New(name, map[string]any{"url": srv.URL, "secrets": signWith, "allow_private": true}, sink.Env{})
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, relay.SinkConfig{Name: name, Type: webhook.Type.Name, Sink: s, MaxAttempts: 1})
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{Sinks: sinks, PollInterval: 50 * time.Millisecond})

	for _, m := range []outboxd.Message{
		{Sink: "rotating", DedupKey: "order-1", Payload: json.RawMessage(`{"order": 1}`)},
		{Sink: "wrong", DedupKey: "order-2", Payload: json.RawMessage(`{"order": 2}`)},
	} {
		if _, err := ob.Enqueue(t.Context(), pool, m); err != nil {
			t.Fatal(err)
		}
	}
	signals.WaitWritten(t, deliveryTimeout, "rotating", "sent", 1)
	signals.WaitWritten(t, deliveryTimeout, "wrong", "dead", 1)
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != 1 || handled[0].ID != "rotating/order-1" || string(handled[0].Payload) != `{"order": 1}` {
		t.Fatalf("handled %+v, want only order-1 with its payload", handled)
	}
}
