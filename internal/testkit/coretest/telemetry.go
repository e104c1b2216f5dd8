package coretest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Telemetry is an SDK tracer and meter provider recording in memory.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	// Spans holds the ended spans: a syncer exports each span as it ends,
	// so tests can poll for it.
	Spans         *tracetest.InMemoryExporter
	MeterProvider *sdkmetric.MeterProvider
	// Reader is the meter provider's reader (see Collect).
	Reader *sdkmetric.ManualReader
}

// NewTelemetry returns providers recording in memory, shut down when the
// test ends.
func NewTelemetry(t testing.TB) Telemetry {
	t.Helper()
	tm := Telemetry{Spans: tracetest.NewInMemoryExporter(), Reader: sdkmetric.NewManualReader()}
	tm.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tm.Spans))
	tm.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tm.Reader))
	t.Cleanup(func() {
		_ = tm.TracerProvider.Shutdown(context.Background())
		_ = tm.MeterProvider.Shutdown(context.Background())
	})
	return tm
}

// Collect returns what the meter provider's instruments hold now.
func (tm Telemetry) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Ended returns the ended spans called name, in the order they ended.
func (tm Telemetry) Ended(name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range tm.Spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// SumByAttrs returns an Int64 sum's points keyed by their attribute set
// (none if rm has no metric called name), failing the test if the metric
// is of another kind.
func SumByAttrs(t testing.TB, rm metricdata.ResourceMetrics, name string) map[attribute.Distinct]int64 {
	t.Helper()
	out := map[attribute.Distinct]int64{}
	m, ok := FindMetric(rm, name)
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

// FindMetric returns the metric called name, of any scope, and whether rm
// has one.
func FindMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// Labels returns the key of the attribute set kv, to look a point up in
// what SumByAttrs returns.
func Labels(kv ...attribute.KeyValue) attribute.Distinct {
	set := attribute.NewSet(kv...)
	return set.Equivalent()
}
