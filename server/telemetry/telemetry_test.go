package telemetry

import (
	"context"
	"testing"

	"github.com/outboxd/outboxd/config"
)

// TestResolveOTLP: the OTEL_* variables win over the telemetry block for
// each signal, the per-signal variables over the general ones, and without
// any endpoint there is no exporter.
func TestResolveOTLP(t *testing.T) {
	t.Parallel()
	block := config.TelemetryConfig{OTLPEndpoint: "collector:4318"}
	cases := []struct {
		name string
		cfg  config.TelemetryConfig
		env  map[string]string
		sig  otlpSignal
		want *otlpTarget // nil: no exporter
	}{
		{name: "nothing configured", sig: signalMetrics},
		{name: "block endpoint, metrics path", cfg: block, sig: signalMetrics,
			want: &otlpTarget{protocol: config.ProtocolHTTP, endpoint: "http://collector:4318/v1/metrics"}},
		{name: "block endpoint, traces path", cfg: block, sig: signalTraces,
			want: &otlpTarget{protocol: config.ProtocolHTTP, endpoint: "http://collector:4318/v1/traces"}},
		{name: "grpc has no path", cfg: config.TelemetryConfig{OTLPEndpoint: "http://collector:4317", Protocol: config.ProtocolGRPC}, sig: signalMetrics,
			want: &otlpTarget{protocol: config.ProtocolGRPC, endpoint: "http://collector:4317"}},
		{name: "general env endpoint wins, exporter reads it", cfg: block, sig: signalMetrics,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"},
			want: &otlpTarget{protocol: config.ProtocolHTTP}},
		{name: "metrics env endpoint alone", sig: signalMetrics,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://other:4318/v1/metrics"},
			want: &otlpTarget{protocol: config.ProtocolHTTP}},
		{name: "traces env endpoint says nothing about metrics", sig: signalMetrics,
			env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://other:4318/v1/traces"}},
		{name: "metrics protocol wins over general and block", cfg: config.TelemetryConfig{OTLPEndpoint: "c:1", Protocol: config.ProtocolHTTP}, sig: signalMetrics,
			env:  map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"},
			want: &otlpTarget{protocol: config.ProtocolGRPC, endpoint: "http://c:1"}},
		{name: "OTEL_METRICS_EXPORTER=none disables metrics", cfg: block, sig: signalMetrics,
			env: map[string]string{"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"}},
		{name: "OTEL_METRICS_EXPORTER=none leaves traces", cfg: block, sig: signalTraces,
			env:  map[string]string{"OTEL_METRICS_EXPORTER": "none"},
			want: &otlpTarget{protocol: config.ProtocolHTTP, endpoint: "http://collector:4318/v1/traces"}},
		{name: "SDK disabled", cfg: block, sig: signalMetrics, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "otlp exporter without endpoint means the default collector", sig: signalMetrics,
			env:  map[string]string{"OTEL_METRICS_EXPORTER": "otlp"},
			want: &otlpTarget{protocol: config.ProtocolHTTP}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := resolveOTLP(c.cfg, config.EnvMap(c.env), c.sig)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := resolveOTLP(config.TelemetryConfig{OTLPEndpoint: "c:1"}, config.EnvMap(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}), signalMetrics); err == nil {
		t.Error("an unknown protocol was accepted")
	}
}

// TestNewTelemetryWithoutEndpointExportsNothing: no endpoint means neither
// spans nor metrics get an exporter.
func TestNewTelemetryWithoutEndpointExportsNothing(t *testing.T) {
	t.Parallel()
	tel, err := New(context.Background(), config.TelemetryConfig{ServiceName: "test"}, config.EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Exporting || tel.ExportingMetrics {
		t.Fatalf("exporting spans %v, metrics %v without an endpoint", tel.Exporting, tel.ExportingMetrics)
	}
}
