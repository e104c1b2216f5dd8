package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/internal/testkit/consoletest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/api"
)

// consoleToken is the bearer token of consoleConfig.
const consoleToken = "console-test-token"

// consoleConfig has a token and a sink whose options hold secrets.
const consoleConfig = `http:
  token: ` + consoleToken + `
sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "whsec_dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQtMzJieXRlcw=="}
`

// metricsPage is what the metrics handler of serveMux answers.
const metricsPage = "the metrics"

// serveMux serves with httptest, on a fresh schema, what serve serves for
// the configuration cfgYAML (newMux): the API, the metrics and, unless
// http.ui is false, the console (newConsole). It returns the server's URL
// and the schema's pool and outbox.
func serveMux(t *testing.T, cfgYAML string) (string, *pgxpool.Pool, *testdb.Outbox) {
	t.Helper()
	pool, ob := testdb.New(t)
	cfg, err := config.Parse([]byte(cfgYAML), "test.yaml", config.EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	// What is mounted where matters here, not the API's own pool (its
	// statements' timeout): the test's pool serves.
	log := slog.New(slog.DiscardHandler)
	a := &api.API{Config: cfg, Outbox: ob.Outbox, Operator: ob.Operator, Migrator: ob.Migrator, DB: pool, Log: log,
		Tracing: tracenoop.NewTracerProvider(), Meters: metricnoop.NewMeterProvider()}
	var ui http.Handler
	if cfg.HTTP.UI {
		c, err := newConsole(cfg, ob.Operator, pool, cfg.SinkConfigs(), log, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		ui = c
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, metricsPage) })
	srv := httptest.NewServer(newMux(a, metrics, ui))
	t.Cleanup(srv.Close)
	return srv.URL, pool, ob
}

// The console is served at / beside the API, and never shows a secret of
// the configuration; with http.ui false, / is not found.
// (Mutation: consoleSinks describing a sink's type with its %+v, options
// included, fails this test.)
func TestConsoleMountedAndFreeOfSecrets(t *testing.T) {
	t.Parallel()
	url, pool, ob := serveMux(t, consoleConfig)
	browser := consoletest.New(t, url)
	browser.SignIn(consoleToken)
	testdb.DeadRows(t, pool, ob, "partner", "boom")
	for _, path := range []string{"/", "/messages", "/dead-letters", "/messages/1"} {
		resp, body := browser.Get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		for _, secret := range []string{consoleToken, "whsec_", "partner.example"} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s shows %q from the configuration", path, secret)
			}
		}
	}
	off, _, _ := serveMux(t, "http:\n  ui: false\n")
	resp, err := http.Get(off + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / with http.ui false: %d, want 404", resp.StatusCode)
	}
}

// The metrics are served at api.MetricsPath beside the API, open, to GET
// only (405 naming GET otherwise), as at the API's endpoints; the API's
// own endpoints are there too.
// (Mutation: newMux mounting the metrics with mux.Handle, every method
// served, fails this test.)
func TestMetricsMountedBesideTheAPI(t *testing.T) {
	t.Parallel()
	url, _, _ := serveMux(t, consoleConfig)
	for _, c := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, api.MetricsPath, http.StatusOK, metricsPage},
		{http.MethodPost, api.MetricsPath, http.StatusMethodNotAllowed, "allowed: GET, HEAD"},
		{http.MethodGet, "/healthz", http.StatusOK, `"ok"`},
		{http.MethodGet, "/v1/stats", http.StatusUnauthorized, "bearer"},
	} {
		req, err := http.NewRequest(c.method, url+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.status || !strings.Contains(strings.ToLower(string(body)), strings.ToLower(c.body)) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, resp.StatusCode, body, c.status, c.body)
		}
	}
}
