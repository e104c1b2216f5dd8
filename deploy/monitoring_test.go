package deploy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

const (
	alertsFile     = "prometheus/alerts.yaml"
	alertTestsFile = "prometheus/alerts_test.yaml"
	dashboardFile  = "grafana/outboxd.json"
	runbookFile    = "../docs/runbook.md"
	// runbookURL is where each alert's runbook_url points, followed by
	// the alert's section anchor.
	runbookURL = "https://github.com/outboxd/outboxd/blob/main/docs/runbook.md#"
)

// wantAlerts are the alerts issues 15, 21 (the open breaker), 24 (a
// hand pause apart from a Retry-After, a deployment without stats) and 43
// (a refused reload) ask for, by the rule that provides each.
var wantAlerts = []string{
	"OutboxdOldestPendingTooOld", "OutboxdDeadLetters", "OutboxdDeliveryFailureRatio",
	"OutboxdSinkPausedLong", "OutboxdSinkPausedByHand", "OutboxdNoStats", "OutboxdNoRelayUp",
	"OutboxdCircuitBreakerOpen", "OutboxdConfigReloadFailed",
}

// deploymentLabels are the labels that tell one deployment's series from
// another's: every aggregation of an alert keeps them.
var deploymentLabels = []string{"namespace", "job"}

var promql = parser.NewParser(parser.Options{})

// metricNames returns the metric names expr selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	node, err := promql.ParseExpr(expr)
	if err != nil {
		t.Fatalf("PromQL %q: %v", expr, err)
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Fatalf("PromQL %q selects no metric", expr)
	}
	return names
}

// alertRules parses alerts.yaml with Prometheus' own rule file parser
// (which also parses and validates every expression and template).
func alertRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", alertsFile, errs)
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// grafanaVariables stand for the dashboard's variables so its queries
// parse as PromQL.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$sink", ".*", "$namespace", ".*", "$job", ".*")

// dashboardQueries returns every PromQL expression of the dashboard's
// panels, and the metrics its variables' label_values() queries read.
func dashboardQueries(t *testing.T) (exprs, variableMetrics []string) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []panel
		Templating struct {
			List []struct {
				Type  string
				Query json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				exprs = append(exprs, grafanaVariables.Replace(target.Expr))
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			for _, m := range labelValues.FindAllStringSubmatch(string(v.Query), -1) {
				variableMetrics = append(variableMetrics, m[1])
			}
		}
	}
	return exprs, variableMetrics
}

type panel struct {
	Title   string
	Targets []struct{ Expr string }
	Panels  []panel // a row's panels
}

// TestAlertsAndDashboardUseExportedMetrics parses the alert rules and the
// dashboard's queries with Prometheus' parsers and checks every metric they
// read against what `outboxd serve` exposes at /metrics after a delivery.
func TestAlertsAndDashboardUseExportedMetrics(t *testing.T) {
	rules := alertRules(t)
	var names []string
	for _, want := range wantAlerts {
		if !slices.ContainsFunc(rules, func(r rulefmt.Rule) bool { return r.Alert == want }) {
			t.Errorf("%s has no alert %s", alertsFile, want)
		}
	}
	for _, r := range rules {
		names = append(names, metricNames(t, r.Expr)...)
	}
	exprs, variableMetrics := dashboardQueries(t)
	if len(exprs) < 10 {
		t.Fatalf("the dashboard has %d queries", len(exprs))
	}
	for _, e := range exprs {
		names = append(names, metricNames(t, e)...)
	}
	names = append(names, variableMetrics...)

	exported := exportedMetrics(t)
	for _, name := range names {
		if !exported[name] {
			t.Errorf("metric %s is used but not exported by outboxd serve", name)
		}
	}
}

// exportedMetrics runs `outboxd serve` (built from this checkout) with a log
// sink, enqueues and delivers one message through its API, and returns the
// metric names /metrics then exposes, with histograms' _bucket, _sum and
// _count series.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	base := "http://" + serveLogSink(t).Addr()
	resp, err := http.Post(base+"/v1/messages", "application/json", strings.NewReader(`{"sink":"audit","dedup_key":"m-1","payload":{"n":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/messages: %s", resp.Status)
	}
	exported := map[string]bool{}
	testrelay.WaitFor(t, 30*time.Second, "a delivery counted at /metrics", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		textParser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := textParser.TextToMetricFamilies(io.Reader(resp.Body))
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		for name, f := range families {
			exported[name] = true
			if f.GetType().String() == "HISTOGRAM" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					exported[name+suffix] = true
				}
			}
		}
		// The table gauges come once the relay has computed the cluster's
		// row counts, right after it starts, alongside the first delivery.
		return exported["outboxd_deliveries_total"] && exported["outboxd_delivery_lag_seconds"] && exported["outboxd_rows"]
	})
	return exported
}

// operationsFile documents the metric names and their deprecated aliases.
const operationsFile = "../docs/operations.md"

// foreignMetricPrefixes start the metric families /metrics serves that are
// not outboxd's own: the Go runtime's, the process's, the HTTP server
// instrumentation's (OpenTelemetry's names) and the resource's
// target_info.
var foreignMetricPrefixes = []string{"go_", "process_", "http_server_", "target_info"}

// TestEveryMetricHasTheOnePrefixOrIsADocumentedAlias: every metric the
// real binary serves at /metrics after a delivery starts with outboxd_,
// is a foreign family, or is an outbox_ name served beside its outboxd_
// name and listed as such in docs/operations.md's table of deprecated
// aliases.
//
// Mutation, failing this test: telemetry.New serving the registry without
// prefixed (outbox_deliveries_total and the engine's other metrics have no
// outboxd_ name).
func TestEveryMetricHasTheOnePrefixOrIsADocumentedAlias(t *testing.T) {
	doc, err := os.ReadFile(operationsFile)
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	for name := range exported {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if base != name && exported[base] {
			continue // a histogram's series, checked by its family
		}
		rest, deprecated := strings.CutPrefix(name, "outbox_")
		switch {
		case strings.HasPrefix(name, "outboxd_"),
			slices.ContainsFunc(foreignMetricPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }):
		case deprecated && !exported["outboxd_"+rest]:
			t.Errorf("%s is served without its outboxd_ name", name)
		case deprecated && !strings.Contains(string(doc), fmt.Sprintf("| `%s` | `outboxd_%s` |", name, rest)):
			t.Errorf("%s is not in %s's table of deprecated names", name, operationsFile)
		case !deprecated:
			t.Errorf("%s has neither the outboxd_ prefix nor a foreign one", name)
		}
	}
}

// serveLogSink runs `outboxd serve` (built from this checkout) on a fresh
// schema with one log sink, audit, its API on a loopback port, and extra
// in its environment.
func serveLogSink(t *testing.T, extra ...string) *proc.Server {
	t.Helper()
	_, ob := testdb.New(t)
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	yaml := fmt.Sprintf("database: {url: %q, schema: %s}\nrelay: {poll_interval: 100ms}\nhttp: {listen: 127.0.0.1:0}\nsinks:\n  audit: {type: log}\n",
		testdb.URL(), ob.Schema())
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := proc.Serve(t, binary, config, proc.Environ(extra...))
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// TestAlertsPassPromtool lints the rules with promtool (Debian's prometheus
// package; .ci/run installs it) and runs their unit tests
// (prometheus/alerts_test.yaml): a hand pause fires OutboxdSinkPausedByHand
// and never OutboxdSinkPausedLong, a Retry-After pause the other way round,
// two deployments with a sink of the same name alert apart, and a refused
// reload alerts for its relay after 10 minutes, a corrected one never.
// Mutation: dropping {reason="retry_after"} from OutboxdSinkPausedLong,
// aggregating OutboxdDeadLetters by (sink) only, or OutboxdConfigReloadFailed
// with for: 1m, makes the unit tests fail.
func TestAlertsPassPromtool(t *testing.T) {
	promtool := proc.RequireTool(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd := exec.Command(promtool, "test", "rules", filepath.Base(alertTestsFile))
	cmd.Dir = filepath.Dir(alertTestsFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", alertTestsFile, err, out)
	}
}

// TestAlertsAggregateByDeploymentAndLinkRunbook: every aggregation in an
// alert keeps namespace and job (absent(), which has no labels to keep, is
// the one exception), every alert has a unit test in alerts_test.yaml, and
// every alert's runbook_url points at a section of docs/runbook.md named
// after it.
// Mutation: a rule aggregating by (sink) only, a runbook_url with a typo in
// its anchor, or a runbook section removed makes this fail.
func TestAlertsAggregateByDeploymentAndLinkRunbook(t *testing.T) {
	runbook, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(string(runbook), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	tests, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range alertRules(t) {
		if url := r.Annotations["runbook_url"]; url != runbookURL+strings.ToLower(r.Alert) || !sections[strings.ToLower(r.Alert)] {
			t.Errorf("%s: runbook_url %q, want %s%s and a section \"## %s\" in %s", r.Alert, url, runbookURL, strings.ToLower(r.Alert), r.Alert, runbookFile)
		}
		if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
			t.Errorf("%s: no unit test in %s", r.Alert, alertTestsFile)
		}
		node, err := promql.ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", r.Alert, err)
		}
		parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
			if agg, ok := n.(*parser.AggregateExpr); ok {
				for _, label := range deploymentLabels {
					if agg.Without || !slices.Contains(agg.Grouping, label) {
						t.Errorf("%s: %s does not keep the label %s", r.Alert, agg, label)
					}
				}
			}
			return nil
		})
	}
}
