package telemetry

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/outboxd/outboxd/config"
)

// TestMetricsHaveBuildInfoAndNoScopeLabels: /metrics carries
// outboxd_build_info = 1 with the build's labels, and the series of an
// OpenTelemetry instrument carry no otel_scope_* labels. (Mutation:
// dropping otelprom.WithoutScopeInfo() adds otel_scope_name to the
// counter's series and fails this test.)
func TestMetricsHaveBuildInfoAndNoScopeLabels(t *testing.T) {
	t.Parallel()
	tel, err := New(context.Background(), config.TelemetryConfig{ServiceName: "test"}, config.EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if err := tel.ReportBuild(BuildInfo{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26"}); err != nil {
		t.Fatal(err)
	}
	counter, err := tel.MeterProvider.Meter("github.com/outboxd/outboxd/test").Int64Counter("outbox.test.events")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 1)

	rec := httptest.NewRecorder()
	tel.Metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	bi := families[BuildInfoMetric]
	if bi == nil || len(bi.Metric) != 1 || bi.Metric[0].GetGauge().GetValue() != 1 {
		t.Fatalf("%s: %v", BuildInfoMetric, bi)
	}
	labels := map[string]string{}
	for _, l := range bi.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "v1.2.3" || labels["revision"] != "abc123" || labels["goversion"] != "go1.26" {
		t.Errorf("%s labels %v", BuildInfoMetric, labels)
	}
	if families["outbox_test_events_total"] == nil {
		t.Fatalf("the counter is not served; families: %d", len(families))
	}
	for name, f := range families {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if strings.HasPrefix(l.GetName(), "otel_scope_") {
					t.Errorf("%s carries %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}
