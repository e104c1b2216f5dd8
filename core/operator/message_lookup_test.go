package operator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// An operator finds a message by id or by (sink, dedup key) and sees what
// happened to it: each failed attempt with its error, the receipt of the
// delivery that worked, and the trace it belongs to.
func TestMessageLookupShowsAttemptsReceiptAndTrace(t *testing.T) {
	b := coretest.Setup(t)
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(b.Ctx, "checkout")
	res, err := b.Outbox.Enqueue(ctx, b.Pool, outboxd.Message{Sink: "partner", DedupKey: "order-7", Payload: map[string]int{"order": 7},
		OrderingKey: "customer-1", Headers: map[string]string{"x-tenant": "acme"}})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	fake := sink.Func(func(_ context.Context, d *sink.Delivery) error {
		if calls.Add(1) == 1 {
			return errors.New("502 from partner: upstream down")
		}
		return d.SetReceipt(map[string]string{"status": "accepted"})
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 10 * time.Millisecond, Sinks: []relay.SinkConfig{
		{Name: "partner", Sink: fake, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}}})
	signals.WaitWritten(t, 10*time.Second, "partner", "sent", 1)

	byID, err := b.Outbox.Message(b.Ctx, b.Pool, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := b.Outbox.MessageByKey(b.Ctx, b.Pool, "partner", "order-7")
	if err != nil {
		t.Fatal(err)
	}
	if byID.ID != byKey.ID || byKey.ID != res.ID {
		t.Fatalf("by id %d, by key %d, enqueued %d", byID.ID, byKey.ID, res.ID)
	}
	m := byID
	if m.Status != status.Sent || m.Attempts != 2 || m.SentAt == nil || m.OrderingKey != "customer-1" || m.Headers["x-tenant"] != "acme" {
		t.Errorf("message = %+v", m)
	}
	if len(m.FailedAttempts) != 1 || m.FailedAttempts[0].Attempt != 1 || !strings.Contains(m.FailedAttempts[0].Error, "upstream down") {
		t.Errorf("failed attempts = %+v, want attempt 1 with the receiver's error", m.FailedAttempts)
	}
	if string(m.Receipt) != `{"status": "accepted"}` {
		t.Errorf("receipt = %s", m.Receipt)
	}
	if want := span.SpanContext().TraceID().String(); m.TraceID() != want {
		t.Errorf("trace id = %q, want the producer's %q", m.TraceID(), want)
	}
	if string(m.Payload) != `{"order": 7}` {
		t.Errorf("payload = %s", m.Payload)
	}

	if _, err := b.Outbox.Message(b.Ctx, b.Pool, res.ID+1000); !errors.Is(err, operator.ErrMessageNotFound) {
		t.Errorf("unknown id: %v, want ErrMessageNotFound", err)
	}
	if _, err := b.Outbox.MessageByKey(b.Ctx, b.Pool, "partner", "order-8"); !errors.Is(err, operator.ErrMessageNotFound) {
		t.Errorf("unknown key: %v, want ErrMessageNotFound", err)
	}
	if (operator.StoredMessage{}).TraceID() != "" {
		t.Error("a message without traceparent has a trace id")
	}
}

// Searches page newest first with a cursor: every row is seen once, in
// id order from the newest, whatever the page size; filters combine.
func TestMessagesSearchPagesNewestFirstWithACursor(t *testing.T) {
	b := coretest.Setup(t)
	ids := b.EnqueueN(t, "a", 23, nil)
	b.EnqueueN(t, "b", 5, nil)
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET status = 'dead' WHERE sink = 'a' AND id % 4 = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET created_at = now() - interval '2 days' WHERE sink = 'a' AND id < $1", ids[10]); err != nil {
		t.Fatal(err)
	}

	var seen []int64
	pages := 0
	f := operator.MessageFilter{Sink: "a", Limit: 10}
	for {
		page, err := b.Outbox.Messages(b.Ctx, b.Pool, f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range page.Messages {
			if m.Sink != "a" {
				t.Fatalf("sink filter let %+v through", m)
			}
			seen = append(seen, m.ID)
		}
		if page.Next == 0 {
			break
		}
		f.Before = page.Next
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(seen, want) || pages != 3 {
		t.Fatalf("paged %d times through %v, want 3 pages of %v", pages, seen, want)
	}

	count := func(f operator.MessageFilter) int {
		t.Helper()
		page, err := b.Outbox.Messages(b.Ctx, b.Pool, f)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Messages)
	}
	var dead int
	for _, id := range ids {
		if id%4 == 0 {
			dead++
		}
	}
	for name, c := range map[string]struct {
		f    operator.MessageFilter
		want int
	}{
		"status":               {operator.MessageFilter{Status: status.Dead}, dead},
		"sink and key":         {operator.MessageFilter{Sink: "b", DedupKey: "k-3"}, 1},
		"key in every sink":    {operator.MessageFilter{DedupKey: "k-3"}, 2},
		"created before":       {operator.MessageFilter{Sink: "a", CreatedBefore: time.Now().Add(-24 * time.Hour)}, 10},
		"created from":         {operator.MessageFilter{CreatedFrom: time.Now().Add(-time.Hour)}, 23 - 10 + 5},
		"limit above the cap":  {operator.MessageFilter{Limit: operator.MaxMessageLimit + 1}, 28},
		"nothing matches":      {operator.MessageFilter{Sink: "c"}, 0},
		"cursor below the ids": {operator.MessageFilter{Before: ids[0]}, 0},
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%s: %d messages, want %d", name, got, c.want)
		}
	}
}

// ExampleOperator_MessageByKey looks a message up the way a producer knows
// it: by sink and dedup key.
func ExampleOperator_MessageByKey() {
	ctx := context.Background()
	pool, ob, ops, cleanup := exampleOutbox(ctx, "example_lookup")
	defer cleanup()
	if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "partner", DedupKey: "order-42", Payload: map[string]int{"order": 42}}); err != nil {
		panic(err)
	}
	m, err := ops.MessageByKey(ctx, pool, "partner", "order-42")
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Status, m.Attempts, string(m.Payload))
	_, err = ops.MessageByKey(ctx, pool, "partner", "order-43")
	fmt.Println(errors.Is(err, operator.ErrMessageNotFound))
	// Output:
	// pending 0 {"order": 42}
	// true
}

// ExampleOperator_Messages pages through a sink's messages, newest first.
func ExampleOperator_Messages() {
	ctx := context.Background()
	pool, ob, ops, cleanup := exampleOutbox(ctx, "example_search")
	defer cleanup()
	for i := range 5 {
		if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "partner", DedupKey: fmt.Sprint("order-", i), Payload: "x"}); err != nil {
			panic(err)
		}
	}
	f := operator.MessageFilter{Sink: "partner", Limit: 2}
	for {
		page, err := ops.Messages(ctx, pool, f)
		if err != nil {
			panic(err)
		}
		var keys []string
		for _, m := range page.Messages {
			keys = append(keys, m.DedupKey)
		}
		fmt.Println(strings.Join(keys, " "))
		if page.Next == 0 {
			break
		}
		f.Before = page.Next // the cursor: the next page starts below it
	}
	// Output:
	// order-4 order-3
	// order-2 order-1
	// order-0
}
