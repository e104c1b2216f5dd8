// Package telemetry sets up what outboxd reports about itself: the
// OpenTelemetry tracer and meter providers (OTLP export as the telemetry
// block and the standard OTEL_* variables say, Prometheus at /metrics) and
// the process's slog logger, scrubbed of secrets.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxd/outboxd/config"
)

// Telemetry holds the process's tracer and meter providers and the handler
// that serves /metrics. Build it with [New]; Shutdown flushes.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	// Metrics serves the Prometheus exposition of MeterProvider's metrics
	// plus Go runtime and process metrics.
	Metrics http.Handler
	// Exporting reports whether spans leave the process (an OTLP exporter
	// is configured).
	Exporting bool
	// ExportingMetrics reports whether metrics are also pushed over OTLP,
	// besides being served at /metrics.
	ExportingMetrics bool

	// registry is what Metrics serves.
	registry *prometheus.Registry
}

// New builds the providers from the telemetry block and the
// standard OTEL_* variables, which win over the block as they do for every
// OpenTelemetry program. Without an endpoint in either, no exporter is
// created and nothing goes over the network; spans still get ids, so trace
// context keeps flowing from producers to deliveries.
func New(ctx context.Context, cfg config.TelemetryConfig, env config.LookupEnv) (*Telemetry, error) {
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

	mpOpts, metricExporter, err := meterReaders(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Without the scope labels: otel_scope_name and otel_scope_version
	// on every series say which library recorded it, which no query needs
	// (the metric names tell) and every dashboard would have to aggregate
	// away. target_info, the resource's attributes, stays.
	promExporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mpOpts = append(mpOpts, sdkmetric.WithResource(res), sdkmetric.WithReader(promExporter), sdkmetric.WithView(boundedHTTPServerMetrics))
	return &Telemetry{
		TracerProvider:   sdktrace.NewTracerProvider(tpOpts...),
		MeterProvider:    sdkmetric.NewMeterProvider(mpOpts...),
		Metrics:          promhttp.HandlerFor(prefixed{reg}, promhttp.HandlerOpts{}),
		Exporting:        exporter != nil,
		ExportingMetrics: metricExporter,
		registry:         reg,
	}, nil
}

// httpServerMetricKeys are the attributes the HTTP server's request metrics
// keep, each bounded by the server's own routes and answers. The
// instrumentation also records server.address and server.port, taken from
// the client's Host header: a client varying it would add series to
// /metrics without end.
var httpServerMetricKeys = []attribute.Key{
	"http.request.method", // unknown methods are recorded as _OTHER
	"http.response.status_code",
	"http.route", // the matched pattern, never the path
	"url.scheme",
	"network.protocol.name",
	"network.protocol.version",
	"error.type",
}

// boundedHTTPServerMetrics keeps only httpServerMetricKeys on the
// http.server.* instruments.
var boundedHTTPServerMetrics = sdkmetric.NewView(
	sdkmetric.Instrument{Name: "http.server.*"},
	sdkmetric.Stream{AttributeFilter: attribute.NewAllowKeysFilter(httpServerMetricKeys...)},
)

// meterReaders returns the meter provider option adding a periodic OTLP
// reader when a metrics endpoint is configured (none otherwise) and whether
// it did. The reader pushes every OTEL_METRIC_EXPORT_INTERVAL (the SDK's
// default 60s) and once more when the provider shuts down.
func meterReaders(ctx context.Context, cfg config.TelemetryConfig, env config.LookupEnv) ([]sdkmetric.Option, bool, error) {
	exp, err := newMetricExporter(ctx, cfg, env)
	if exp == nil || err != nil {
		return nil, false, err
	}
	return []sdkmetric.Option{sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp))}, true, nil
}

// Shutdown flushes buffered spans and metrics and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.TracerProvider.Shutdown(ctx), t.MeterProvider.Shutdown(ctx))
}

// ShutdownTimeout bounds the final flush of spans and metrics.
const ShutdownTimeout = 10 * time.Second

// Flush flushes spans and metrics, waiting at most ShutdownTimeout for the
// collector, even once ctx is cancelled, and logs a failure.
func (t *Telemetry) Flush(ctx context.Context, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("telemetry shutdown", ErrAttr(err))
	}
}

// InputError is a telemetry setting, of the telemetry block or of the
// OTEL_* variables, that cannot be used: the user's to fix, unlike a
// failure to set up what the settings ask for.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }
