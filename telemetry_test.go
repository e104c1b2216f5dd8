package outboxd_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

func TestEnqueueCountsCreatedAndDuplicates(t *testing.T) {
	b := coretest.Setup(t)
	tm := coretest.NewTelemetry(t)
	// The Outbox is immutable: one recording into tm, on b's schema.
	ob, err := outboxd.New(nil, outboxd.Options{Schema: b.Outbox.Schema(), MeterProvider: tm.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ob.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "one", Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ob.EnqueueBatch(b.Ctx, b.Pool, []outboxd.Message{
		{Sink: "s", DedupKey: "one", Payload: "x"}, {Sink: "s", DedupKey: "two", Payload: "x"},
	}); err != nil {
		t.Fatal(err)
	}
	got := coretest.SumByAttrs(t, tm.Collect(t), "outbox.enqueues")
	created := coretest.Labels(attribute.String("sink", "s"), attribute.String("result", "created"))
	duplicate := coretest.Labels(attribute.String("sink", "s"), attribute.String("result", "duplicate"))
	if got[created] != 2 || got[duplicate] != 2 {
		t.Fatalf("outbox.enqueues = %v, want 2 created and 2 duplicates", got)
	}
}
