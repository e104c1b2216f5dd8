package operator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

func TestGaugesReportRowsAndOldestPendingAgePerSink(t *testing.T) {
	b := coretest.Setup(t)
	tm := coretest.NewTelemetry(t)
	b.EnqueueN(t, "mail", 2, nil)
	b.EnqueueN(t, "stray-1", 1, nil)
	b.EnqueueN(t, "stray-2", 1, nil)
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET created_at = now() - interval '1 hour' WHERE dedup_key = 'k-0' AND sink = 'mail'"); err != nil {
		t.Fatal(err)
	}
	if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
		t.Fatal(err)
	}
	reg, err := b.Outbox.RegisterGauges(tm.MeterProvider, b.Pool, operator.GaugeConfig{Sinks: []string{"mail", "idle"}, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()

	rows, ages := gauges(t, tm.Collect(t))
	for sink, want := range map[string]int64{"mail": 2, "idle": 0, operator.UnknownSink: 2} {
		if got := rows[coretest.Labels(attribute.String("sink", sink), attribute.String("status", "pending"))]; got != want {
			t.Errorf("outbox.rows{sink=%s,status=pending} = %d, want %d", sink, got, want)
		}
	}
	if got := rows[coretest.Labels(attribute.String("sink", "idle"), attribute.String("status", "dead"))]; got != 0 {
		t.Errorf("idle sink reports %d dead rows", got)
	}
	if len(rows) != 3*4 {
		t.Errorf("outbox.rows has %d series, want 3 sinks x 4 statuses (pending, in_progress, failed, dead)", len(rows))
	}
	if age := ages[coretest.Labels(attribute.String("sink", "mail"))]; age < 3590 || age > 3700 {
		t.Errorf("oldest pending age of mail = %vs, want about an hour", age)
	}

	// Within Refresh a scrape reuses the cached snapshot: a new row is not
	// seen yet, even once counted, and the database is not asked again.
	b.EnqueueN(t, "idle", 1, nil)
	if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
		t.Fatal(err)
	}
	rows, _ = gauges(t, tm.Collect(t))
	if got := rows[coretest.Labels(attribute.String("sink", "idle"), attribute.String("status", "pending"))]; got != 0 {
		t.Errorf("second scrape within the refresh window saw %d idle rows, want the cached 0", got)
	}
}

// gauges returns the points of outbox.rows and outbox.oldest_pending.age.
func gauges(t *testing.T, rm metricdata.ResourceMetrics) (rows map[attribute.Distinct]int64, ages map[attribute.Distinct]float64) {
	t.Helper()
	rows, ages = map[attribute.Distinct]int64{}, map[attribute.Distinct]float64{}
	if m, ok := coretest.FindMetric(rm, "outbox.rows"); ok {
		for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			rows[p.Attributes.Equivalent()] = p.Value
		}
	} else {
		t.Error("no outbox.rows gauge")
	}
	if m, ok := coretest.FindMetric(rm, "outbox.oldest_pending.age"); ok {
		for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
			ages[p.Attributes.Equivalent()] = p.Value
		}
	} else {
		t.Error("no outbox.oldest_pending.age gauge")
	}
	return rows, ages
}

// The table gauges are registered once per process with the application's
// MeterProvider (here one read by hand; outboxd uses its Prometheus
// exporter). They report the cluster's stats snapshot, which a relay
// recomputes every few seconds (here, with no relay, by hand); scrapes
// share one read of it per refresh window.
func ExampleOperator_RegisterGauges() {
	ctx := context.Background()
	pool, ob, ops, cleanup := exampleOutbox(ctx, "example_gauges")
	defer cleanup()
	if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "alerts", DedupKey: "disk-full", Payload: "disk full"}); err != nil {
		panic(err)
	}

	if err := ops.RefreshStatsSnapshot(ctx, pool, "example"); err != nil {
		panic(err)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := ops.RegisterGauges(mp, pool, operator.GaugeConfig{Sinks: []string{"alerts"}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = reg.Unregister() }()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	m, _ := coretest.FindMetric(rm, "outbox.rows")
	for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
		if status, _ := p.Attributes.Value("status"); status.AsString() == "pending" {
			sink, _ := p.Attributes.Value("sink")
			fmt.Printf("outbox.rows{sink=%s,status=pending} %d\n", sink.AsString(), p.Value)
		}
	}
	// Output:
	// outbox.rows{sink=alerts,status=pending} 1
}

// TestGaugeReportsSinkPauses: outbox.sink.pause.remaining gives each
// configured sink's remaining pause, as recorded in the database for the
// whole cluster, under reason "retry_after" for a receiver's Retry-After
// and "hand" for an operator's, with 0 for the other reason and for a sink
// that is not paused. Like the other table gauges it is reported with the
// cluster's row counts (here computed by hand; a relay does it every few
// seconds).
// Mutation: reporting every pause under "retry_after" (ignoring by_hand)
// makes this fail; so does dropping the zero series of the reason not in
// force.
func TestGaugeReportsSinkPauses(t *testing.T) {
	b := coretest.Setup(t)
	tm := coretest.NewTelemetry(t)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+".sink_limits (sink, paused_until) VALUES ('mail', now() + interval '1 hour'), ('idle', now() - interval '1 minute')"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "chat", operator.Pause{For: 2 * time.Hour, By: "ops", Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
		t.Fatal(err)
	}
	reg, err := b.Outbox.RegisterGauges(tm.MeterProvider, b.Pool, operator.GaugeConfig{Sinks: []string{"mail", "idle", "chat"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	m, ok := coretest.FindMetric(tm.Collect(t), "outbox.sink.pause.remaining")
	if !ok {
		t.Fatal("no outbox.sink.pause.remaining gauge")
	}
	got := map[attribute.Distinct]float64{}
	for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
		got[p.Attributes.Equivalent()] = p.Value
	}
	if len(got) != 6 {
		t.Errorf("%d series, want two (hand, retry_after) per configured sink", len(got))
	}
	series := func(sink, reason string) (float64, bool) {
		v, ok := got[coretest.Labels(attribute.String("sink", sink), attribute.String("reason", reason))]
		return v, ok
	}
	about := func(sink, reason string, want time.Duration) {
		if r, _ := series(sink, reason); r < (want-time.Minute).Seconds() || r > want.Seconds() {
			t.Errorf("%s{reason=%s} paused for %vs more, want about %s", sink, reason, r, want)
		}
	}
	zero := func(sink, reason string) {
		if r, ok := series(sink, reason); !ok || r != 0 {
			t.Errorf("%s{reason=%s} reports %v, %v; want 0", sink, reason, r, ok)
		}
	}
	about("mail", "retry_after", time.Hour)
	zero("mail", "hand")
	about("chat", "hand", 2*time.Hour)
	zero("chat", "retry_after")
	zero("idle", "hand") // its pause is over
	zero("idle", "retry_after")
}
