package core_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd/core"
)

// TestGaugeReportsSinkPauses: outbox.sink.pause.remaining gives each
// configured sink's remaining Retry-After pause, as recorded in the
// database for the whole cluster, and 0 for a sink that is not paused. Like
// the other table gauges it is reported with the cluster's row counts
// (here computed by hand; a relay does it every few seconds).
func TestGaugeReportsSinkPauses(t *testing.T) {
	b := setup(t)
	tm := newTelemetry(t)
	if _, err := b.pool.Exec(b.ctx, "INSERT INTO "+b.ob.Schema()+".sink_limits (sink, paused_until) VALUES ('mail', now() + interval '1 hour'), ('idle', now() - interval '1 minute')"); err != nil {
		t.Fatal(err)
	}
	if err := b.ob.RefreshStatsSnapshot(b.ctx, b.pool, "test"); err != nil {
		t.Fatal(err)
	}
	reg, err := b.ob.RegisterGauges(tm.mp, b.pool, core.GaugeConfig{Sinks: []string{"mail", "idle"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	m, ok := findMetric(tm.collect(t), "outbox.sink.pause.remaining")
	if !ok {
		t.Fatal("no outbox.sink.pause.remaining gauge")
	}
	got := map[attribute.Distinct]float64{}
	for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
		got[p.Attributes.Equivalent()] = p.Value
	}
	if len(got) != 2 {
		t.Errorf("%d series, want one per configured sink", len(got))
	}
	if r := got[labels(attribute.String("sink", "mail"))]; r < (time.Hour-time.Minute).Seconds() || r > time.Hour.Seconds() {
		t.Errorf("mail paused for %vs more, want about an hour", r)
	}
	if r, ok := got[labels(attribute.String("sink", "idle"))]; !ok || r != 0 {
		t.Errorf("idle (its pause is over) reports %v, %v; want 0", r, ok)
	}
}
