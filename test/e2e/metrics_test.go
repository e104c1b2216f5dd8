package e2e_test

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// TestServeMetricsEndpoint: after serve enqueues (through the API) and
// delivers a message, /metrics carries the delivery and enqueue counters
// and the table gauges, with the configured sink as a label.
func TestServeMetricsEndpoint(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "")
	e.mustRun("migrate")
	srv := e.serve()
	if code, body := call(t, "POST", srv.url("/v1/messages"), "", `{"sink":"partner","dedup_key":"m-1","payload":{"n":1}}`); code != http.StatusCreated {
		t.Fatalf("POST /v1/messages: %d %v", code, body)
	}
	eventually(t, 30*time.Second, "delivery to the webhook receiver", func() bool {
		distinct, _ := rcv.received()
		return distinct == 1
	})
	wants := []string{
		`outbox_rows{`,
		`outbox_oldest_pending_age_seconds{`,
		`outbox_enqueues_total{`,
		`outbox_deliveries_total{`,
		`sink="partner"`,
	}
	// The delivery counter is recorded once the terminal write is done,
	// a moment after the receiver saw the request: poll for it.
	var metrics string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("GET /metrics:\n%s", grepLines(metrics, "outbox_"))
		}
	})
	eventually(t, 10*time.Second, "every outbox metric on /metrics", func() bool {
		resp, err := http.Get(srv.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		metrics = string(raw)
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				return false
			}
		}
		return true
	})
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// TestServeDeleteOnSent: relay.delete_on_sent reaches the relay: a
// delivered row is gone instead of counted as sent (with durable_writes
// on, which must not change the outcome).
func TestServeDeleteOnSent(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "")
	e.extra = []string{"OUTBOXD_RELAY_DELETE_ON_SENT=true", "OUTBOXD_RELAY_DURABLE_WRITES=true"}
	e.mustRun("migrate")
	e.mustRun("enqueue", "--sink", "partner", "--key", "gone-1", "--text", "hello")
	e.serve()
	eventually(t, 30*time.Second, "delivery to the webhook receiver", func() bool {
		distinct, _ := rcv.received()
		return distinct == 1
	})
	eventually(t, 30*time.Second, "the delivered row to be deleted rather than kept as sent", func() bool {
		s := e.stats()["partner"]
		return s["sent_last_hour"] == 0 && s["pending"] == 0 && s["in_progress"] == 0
	})
	if s := e.stats()["partner"]; s["sent_last_hour"] != 0 {
		t.Fatalf("delete_on_sent: stats %v", s)
	}
}

// TestServeMetricsConventions scrapes a real `outboxd serve`: /metrics
// parses as Prometheus' text format, carries outboxd_build_info = 1 with
// the version, revision and Go version `outboxd version` prints, puts no
// otel_scope_* label on any series, and passes `promtool check metrics`.
// (Mutation: not registering the build info in the server's
// startTelemetry, or dropping otelprom.WithoutScopeInfo(), fails this
// test.)
func TestServeMetricsConventions(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "")
	e.mustRun("migrate")
	e.mustRun("enqueue", "--sink", "partner", "--key", "m-1", "--text", "hello")
	srv := e.serve()
	var families map[string]*dto.MetricFamily
	var raw []byte
	// The delivery counter appears once the terminal write is done: poll
	// for it, so that the relay's series are part of what is checked.
	eventually(t, 30*time.Second, "the delivery counter on /metrics", func() bool {
		resp, err := http.Get(srv.url("/metrics"))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		if families, err = parser.TextToMetricFamilies(bytes.NewReader(raw)); err != nil {
			t.Fatalf("/metrics does not parse: %v\n%s", err, raw)
		}
		return families["outbox_deliveries_total"] != nil
	})

	version := map[string]string{}
	for line := range strings.Lines(e.mustRun("version")) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		version[strings.TrimSuffix(k, ":")] = v
	}
	bi := families["outboxd_build_info"]
	if bi == nil || len(bi.Metric) != 1 || bi.Metric[0].GetGauge().GetValue() != 1 {
		t.Fatalf("outboxd_build_info: %v", bi)
	}
	labels := map[string]string{}
	for _, l := range bi.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	revision, _, _ := strings.Cut(version["revision"], " ") // without its time and "modified"
	if labels["version"] != strings.TrimPrefix(version["outboxd"], "version ") || labels["revision"] != revision || labels["goversion"] != version["go"] {
		t.Errorf("outboxd_build_info labels %v; outboxd version says %v", labels, version)
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

	check := exec.Command(proc.RequireTool(t, "promtool"), "check", "metrics")
	check.Stdin = bytes.NewReader(raw)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
