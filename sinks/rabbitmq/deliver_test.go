package rabbitmq_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

func delivery(key string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "orders", DedupKey: key, Payload: json.RawMessage(`{"n":1}`), Attempt: 1, MaxAttempts: 10}
}

func isRetryAfter(err error) bool {
	_, ok := sink.RetryAfterDelay(err)
	return ok
}

// TestPublishFailuresMapToOutcomes publishes into situations the broker
// refuses and checks the outcome of each; afterwards the same sink still
// delivers (a channel closed by an error is replaced).
func TestPublishFailuresMapToOutcomes(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	full := newQueue(t, addr)
	// A queue of one message that refuses more: the broker nacks.
	if _, err := full.ch.QueueDelete(full.queue, false, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := full.ch.QueueDeclare(full.queue, false, false, false, false,
		amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	if err := full.ch.QueueBind(full.queue, "events.#", full.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	url := brokerURL(addr)
	snk := build(t, "orders", map[string]any{"url": url, "exchange": q.exchange, "routing_key": "{{.Headers.route}}"})
	fullSink := build(t, "orders", map[string]any{"url": url, "exchange": full.exchange, "routing_key": "events.x"})
	if err := fullSink.Deliver(t.Context(), delivery("first")); err != nil {
		t.Fatalf("first message into the one-message queue: %v", err)
	}
	routed := func(key, route string) *sink.Delivery {
		d := delivery(key)
		d.Headers = map[string]string{"route": route}
		return d
	}

	tests := []struct {
		name  string
		sink  func() error
		check func(error) bool
		class string
	}{
		{"unroutable (no queue bound)", func() error { return snk.Deliver(t.Context(), routed("a", "nobody.listens")) }, sink.IsPermanent, "permanent"},
		{"routing key template fails", func() error { return snk.Deliver(t.Context(), delivery("b")) }, sink.IsPermanent, "permanent"},
		{"exchange missing", func() error {
			return build(t, "orders", map[string]any{"url": url, "exchange": q.exchange + "-missing", "routing_key": "events.x"}).
				Deliver(t.Context(), delivery("c"))
		}, sink.IsPermanent, "permanent"},
		{"queue full (reject-publish)", func() error { return fullSink.Deliver(t.Context(), delivery("d")) }, isRetryAfter, "retry-after"},
	}
	for _, tt := range tests {
		if err := tt.sink(); err == nil || !tt.check(err) {
			t.Errorf("%s: %v, want a %s error", tt.name, err, tt.class)
		}
	}
	if got := q.messages(t); len(got) != 0 {
		t.Errorf("the queue holds %d messages after refused publishes", len(got))
	}
	if err := snk.Deliver(t.Context(), routed("ok", "events.ok")); err != nil {
		t.Fatalf("a routable message after the failures: %v", err)
	}
	if got := q.messages(t); len(got) != 1 || got[0].ID != "orders/ok" { // message-id: the delivery id
		t.Errorf("queue holds %v, want the one routable message", got)
	}
}

// An unreachable broker is a retryable failure whose text names neither
// the password in the URL nor the password option.
func TestUnreachableBrokerIsRetryableAndKeepsSecrets(t *testing.T) {
	t.Parallel()
	const inURL, inOption = "pa55-in-url", "pa55-option"
	closed := "127.0.0.1:" + strconvItoa(proc.FreePort(t))
	for _, options := range []map[string]any{
		{"url": "amqp://user:" + inURL + "@" + closed + "/", "connect_timeout": "1s"},
		{"url": "amqp://" + closed + "/", "username": "user", "password": inOption, "connect_timeout": "1s"},
	} {
		err := build(t, "orders", options).Deliver(t.Context(), delivery("k"))
		if err == nil || sink.IsPermanent(err) {
			t.Fatalf("unreachable broker: %v, want a retryable error", err)
		}
		if strings.Contains(err.Error(), inURL) || strings.Contains(err.Error(), inOption) {
			t.Errorf("the error repeats a secret: %v", err)
		}
	}
}

// DeliverBatch (the batch prototype) publishes every message of a batch
// and reports an unroutable one on its own.
func TestDeliverBatchReportsEachOutcome(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	snk := build(t, "orders", map[string]any{"url": brokerURL(addr), "exchange": q.exchange, "routing_key": `{{or .OrderingKey "events.x"}}`, "max_in_flight": 8})
	ds := make([]*sink.Delivery, 20)
	for i := range ds {
		ds[i] = delivery(fmt.Sprintf("batch-%02d", i))
	}
	ds[7].OrderingKey = "nobody.listens"
	errs := snk.(*rabbitmq.Sink).DeliverBatch(t.Context(), ds)
	for i, err := range errs {
		if (i == 7) != (err != nil) || (err != nil && !sink.IsPermanent(err)) {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	if got := q.messages(t); len(got) != 19 {
		t.Errorf("the queue holds %d messages, want 19", len(got))
	}
}
