package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an httptest OTLP/HTTP collector: it records the metric
// names of every export to /v1/metrics and accepts (and drops) spans.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	exports int
	names   map[string]bool
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{names: map[string]bool{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || req.URL.Path != "/v1/metrics" {
			return // spans, or a broken request: not what this receiver checks
		}
		var export colmetricpb.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &export); err != nil {
			t.Errorf("OTLP metrics export is not a protobuf ExportMetricsServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.exports++
		for _, rm := range export.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					r.names[m.GetName()] = true
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(r.Close)
	return r
}

// received returns how many exports arrived and which of names they
// lacked.
func (r *otlpReceiver) received(names ...string) (exports int, missing []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if !r.names[n] {
			missing = append(missing, n)
		}
	}
	return r.exports, missing
}

// TestServeExportsMetricsOverOTLP: with an OTLP endpoint configured, serve
// pushes its metrics to the collector, through telemetry.otlp_endpoint or
// the OTEL_* variables. With an hour's export interval, nothing is pushed
// while it runs and everything arrives on SIGTERM: shutdown flushes.
func TestServeExportsMetricsOverOTLP(t *testing.T) {
	t.Parallel()
	want := []string{"outbox.deliveries", "outbox.delivery.duration", "outbox.enqueues", "outbox.rows", "outbox.oldest_pending.age"}
	for _, c := range []struct {
		name        string
		viaEnv      bool   // OTEL_EXPORTER_OTLP_METRICS_ENDPOINT instead of the block
		intervalMS  string // OTEL_METRIC_EXPORT_INTERVAL
		flushedOnly bool   // expect no export before shutdown
	}{
		{name: "telemetry block, flushed on shutdown", intervalMS: "3600000", flushedOnly: true},
		{name: "OTEL env, periodic", viaEnv: true, intervalMS: "200"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			collector := newOTLPReceiver(t)
			rcv := newReceiver(t)
			telemetry := fmt.Sprintf("telemetry:\n  otlp_endpoint: %s\n", collector.URL)
			if c.viaEnv {
				telemetry = ""
			}
			e := newEnv(t, webhookSink("partner", rcv), telemetry)
			e.extra = []string{"OTEL_METRIC_EXPORT_INTERVAL=" + c.intervalMS}
			if c.viaEnv {
				e.extra = append(e.extra, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="+collector.URL+"/v1/metrics")
			}
			e.mustRun("migrate")
			srv := e.serve()
			code, body := call(t, "POST", srv.url("/v1/messages"), "", `{"sink":"partner","dedup_key":"otlp-1","payload":{"n":1}}`)
			if code != http.StatusCreated {
				t.Fatalf("POST /v1/messages: %d %v", code, body)
			}
			eventually(t, 30*time.Second, "delivery to the webhook receiver", func() bool {
				distinct, _ := rcv.received()
				return distinct == 1
			})
			// The table gauges report the cluster's row counts once the
			// relay has computed them (right after it starts, concurrently
			// with the first deliveries).
			eventually(t, 30*time.Second, "the relay's first row counts", func() bool {
				var computed bool
				err := e.pool.QueryRow(context.Background(), "SELECT computed_at IS NOT NULL FROM "+e.schema+".sink_stats_lead").Scan(&computed)
				return err == nil && computed
			})
			if c.flushedOnly {
				if n, _ := collector.received(); n != 0 {
					t.Fatalf("%d exports before shutdown with an hour's interval", n)
				}
				srv.stop(t)
				if n, missing := collector.received(want...); n == 0 || len(missing) > 0 {
					t.Fatalf("after shutdown: %d exports, lacking %v", n, missing)
				}
				return
			}
			eventually(t, 30*time.Second, "periodic OTLP exports holding "+fmt.Sprint(want), func() bool {
				_, missing := collector.received(want...)
				return len(missing) == 0
			})
		})
	}
}

// TestEnqueueCLIExportsEnqueueCounter: `outboxd enqueue` counts its
// enqueues and pushes the counter to the configured collector before it
// exits.
func TestEnqueueCLIExportsEnqueueCounter(t *testing.T) {
	t.Parallel()
	collector := newOTLPReceiver(t)
	e := newEnv(t, "  audit:\n    type: discard\n", fmt.Sprintf("telemetry:\n  otlp_endpoint: %s\n", collector.URL))
	e.mustRun("migrate")
	if n, _ := collector.received(); n != 0 {
		t.Fatalf("migrate pushed %d metric exports", n)
	}
	e.mustRun("enqueue", "--sink", "audit", "--key", "k1", "--text", "hello")
	if n, missing := collector.received("outbox.enqueues"); n == 0 || len(missing) > 0 {
		t.Fatalf("after enqueue: %d exports, lacking %v", n, missing)
	}
}
