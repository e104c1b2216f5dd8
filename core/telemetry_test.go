package core_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/coretest"
)

// telemetry is an SDK meter provider recording in memory.
type telemetry struct {
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
}

func newTelemetry(t *testing.T) telemetry {
	t.Helper()
	tm := telemetry{reader: sdkmetric.NewManualReader()}
	tm.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tm.reader))
	t.Cleanup(func() { _ = tm.mp.Shutdown(context.Background()) })
	return tm
}

func (tm telemetry) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// sumByAttrs returns an Int64 sum's points keyed by their attribute set.
func sumByAttrs(t *testing.T, rm metricdata.ResourceMetrics, name string) map[attribute.Distinct]int64 {
	t.Helper()
	out := map[attribute.Distinct]int64{}
	m, ok := findMetric(rm, name)
	if !ok {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", name, m.Data)
	}
	for _, p := range sum.DataPoints {
		out[p.Attributes.Equivalent()] = p.Value
	}
	return out
}

func findMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func labels(kv ...attribute.KeyValue) attribute.Distinct {
	set := attribute.NewSet(kv...)
	return set.Equivalent()
}

func TestEnqueueCountsCreatedAndDuplicates(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	// The Outbox is immutable: one recording into tm, on b's schema.
	ob, err := core.New(core.Options{Schema: b.Outbox.Schema(), MeterProvider: tm.mp})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := ob.Enqueue(b.Ctx, b.Pool, core.Message{Sink: "s", DedupKey: "one", Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ob.EnqueueBatch(b.Ctx, b.Pool, []core.Message{
		{Sink: "s", DedupKey: "one", Payload: "x"}, {Sink: "s", DedupKey: "two", Payload: "x"},
	}); err != nil {
		t.Fatal(err)
	}
	got := sumByAttrs(t, tm.collect(t), "outbox.enqueues")
	created := labels(attribute.String("sink", "s"), attribute.String("result", "created"))
	duplicate := labels(attribute.String("sink", "s"), attribute.String("result", "duplicate"))
	if got[created] != 2 || got[duplicate] != 2 {
		t.Fatalf("outbox.enqueues = %v, want 2 created and 2 duplicates", got)
	}
}
