package maintenance_test

import (
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// Rows of a sink the relay is not configured with are reported at once by
// name, and counted in the gauge; the configured sink's rows are not.
//
// Mutation checked: check leaving the sink's name out of the report fails
// this test; so does counting the configured sink's rows (configured
// passed as nil).
func TestUnconfiguredSinksAreReportedAndCounted(t *testing.T) {
	b, env := setup(t)
	b.EnqueueN(t, "known", 2, nil)
	b.EnqueueN(t, "typo", 3, nil)
	reader := sdkmetric.NewManualReader()
	start(t, b.Ctx, maintenance.NewUnconfigured(env, b.Outbox.Operator, []string{"known"},
		sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	env.Signals.UnconfiguredSinks.Wait(t, 20*time.Second, "the unconfigured sink reported", func(all [][]string) bool {
		return len(all) > 0 && slices.Equal(all[0], []string{"typo"})
	})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(b.Ctx, &rm); err != nil {
		t.Fatal(err)
	}
	rows, ok := coretest.FindMetric(rm, "outbox.unconfigured_sinks.rows")
	if !ok {
		t.Fatal("no outbox.unconfigured_sinks.rows gauge")
	}
	if p := rows.Data.(metricdata.Gauge[int64]).DataPoints; len(p) != 1 || p[0].Value != 3 {
		t.Errorf("outbox.unconfigured_sinks.rows: %+v, want the 3 rows of typo", p)
	}
}
