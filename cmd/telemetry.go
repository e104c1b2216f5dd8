package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// OTLP protocols, as spelled by OTEL_EXPORTER_OTLP_PROTOCOL and
// telemetry.protocol.
const (
	protocolHTTP = "http/protobuf" // the default, port 4318
	protocolGRPC = "grpc"          // port 4317
)

// otlpTracesPath is appended to a base endpoint for OTLP over HTTP, as the
// OpenTelemetry specification does for OTEL_EXPORTER_OTLP_ENDPOINT.
const otlpTracesPath = "/v1/traces"

// Telemetry holds the process's tracer and meter providers and the handler
// that serves /metrics. Build it with [NewTelemetry]; Shutdown flushes.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	// Metrics serves the Prometheus exposition of MeterProvider's metrics
	// plus Go runtime and process metrics.
	Metrics http.Handler
	// Exporting reports whether spans leave the process (an OTLP exporter
	// is configured).
	Exporting bool
}

// NewTelemetry builds the providers from the telemetry block and the
// standard OTEL_* variables, which win over the block as they do for every
// OpenTelemetry program. Without an endpoint in either, no exporter is
// created and nothing goes over the network; spans still get ids, so trace
// context keeps flowing from producers to deliveries.
func NewTelemetry(ctx context.Context, cfg TelemetryConfig, env LookupEnv) (*Telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", cfg.ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)} // sampler: OTEL_TRACES_SAMPLER
	exporter, err := newTraceExporter(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	if exporter != nil {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exporter))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promExporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	return &Telemetry{
		TracerProvider: sdktrace.NewTracerProvider(tpOpts...),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(promExporter)),
		Metrics:        promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Exporting:      exporter != nil,
	}, nil
}

// Shutdown flushes buffered spans and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.TracerProvider.Shutdown(ctx), t.MeterProvider.Shutdown(ctx))
}

// newTraceExporter returns the OTLP exporter asked for, or nil for none.
func newTraceExporter(ctx context.Context, cfg TelemetryConfig, env LookupEnv) (*otlptrace.Exporter, error) {
	getenv := func(name string) string { v, _ := env(name); return strings.TrimSpace(v) }
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return nil, nil
	}
	envEndpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	if !envEndpoint && cfg.OTLPEndpoint == "" && getenv("OTEL_TRACES_EXPORTER") != "otlp" {
		return nil, nil
	}
	protocol := firstNonEmpty(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), cfg.Protocol, protocolHTTP)
	// The exporters read OTEL_* themselves; the config's endpoint is only
	// passed when the environment names none, because options win over
	// the environment inside the exporters.
	var endpoint string
	if !envEndpoint && cfg.OTLPEndpoint != "" {
		u, err := endpointURL(cfg.OTLPEndpoint)
		if err != nil {
			return nil, err
		}
		endpoint = u
	}
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch protocol {
	case protocolGRPC:
		var opts []otlptracegrpc.Option
		if endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case protocolHTTP, "http/json", "http":
		var opts []otlptracehttp.Option
		if endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+otlpTracesPath))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, badInputf("telemetry: unknown OTLP protocol %q (want %s or %s)", protocol, protocolHTTP, protocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP %s exporter: %w", protocol, err)
	}
	return exp, nil
}

// endpointURL accepts "host:port" or a URL and returns a URL; a bare
// host:port means plain HTTP, as collectors on localhost usually are.
func endpointURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", badInputf("telemetry.otlp_endpoint: want host:port or a URL, got %q", s)
	}
	return u.String(), nil
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
