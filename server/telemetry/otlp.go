package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/outboxd/outboxd/config"
)

// otlpSignal is one kind of telemetry exported over OTLP: the word the
// per-signal OTEL_* variables use for it and the path OTLP over HTTP
// appends to a base endpoint, as the OpenTelemetry specification does for
// OTEL_EXPORTER_OTLP_ENDPOINT.
type otlpSignal struct {
	envWord string
	path    string
}

var (
	signalTraces  = otlpSignal{envWord: "TRACES", path: "/v1/traces"}
	signalMetrics = otlpSignal{envWord: "METRICS", path: "/v1/metrics"}
)

// otlpTarget is how one signal is exported.
type otlpTarget struct {
	// protocol is config.ProtocolHTTP or config.ProtocolGRPC.
	protocol string
	// endpoint is the full URL taken from telemetry.otlp_endpoint, or ""
	// when the OTEL_* variables name the endpoint: the exporters read
	// those themselves, and an option would win over them.
	endpoint string
}

// resolveOTLP decides whether and how sig is exported. The standard OTEL_*
// variables win over the telemetry block; without an endpoint in either
// (and without OTEL_<SIGNAL>_EXPORTER=otlp, which means the default local
// collector) it returns nil: no exporter, no network traffic.
func resolveOTLP(cfg config.TelemetryConfig, env config.LookupEnv, sig otlpSignal) (*otlpTarget, error) {
	getenv := func(name string) string { v, _ := env(name); return strings.TrimSpace(v) }
	exporterVar := "OTEL_" + sig.envWord + "_EXPORTER"
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv(exporterVar) == "none" {
		return nil, nil
	}
	envEndpoint := getenv("OTEL_EXPORTER_OTLP_"+sig.envWord+"_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	if !envEndpoint && cfg.OTLPEndpoint == "" && getenv(exporterVar) != "otlp" {
		return nil, nil
	}
	t := &otlpTarget{protocol: firstNonEmpty(getenv("OTEL_EXPORTER_OTLP_"+sig.envWord+"_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), cfg.Protocol, config.DefaultProtocol)}
	switch t.protocol {
	case config.ProtocolGRPC:
	case config.ProtocolHTTP, "http/json", "http":
		t.protocol = config.ProtocolHTTP
	default:
		return nil, &InputError{Err: fmt.Errorf("telemetry: unknown OTLP protocol %q (want %s or %s)", t.protocol, config.ProtocolHTTP, config.ProtocolGRPC)}
	}
	if !envEndpoint && cfg.OTLPEndpoint != "" {
		u, err := endpointURL(cfg.OTLPEndpoint)
		if err != nil {
			return nil, err
		}
		if t.protocol == config.ProtocolHTTP {
			u = strings.TrimSuffix(u, "/") + sig.path
		}
		t.endpoint = u
	}
	return t, nil
}

// newTraceExporter returns the OTLP span exporter asked for, or nil for none.
func newTraceExporter(ctx context.Context, cfg config.TelemetryConfig, env config.LookupEnv) (*otlptrace.Exporter, error) {
	t, err := resolveOTLP(cfg, env, signalTraces)
	if t == nil || err != nil {
		return nil, err
	}
	var exp *otlptrace.Exporter
	if t.protocol == config.ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx, endpointOption(t.endpoint, otlptracegrpc.WithEndpointURL)...)
	} else {
		exp, err = otlptracehttp.New(ctx, endpointOption(t.endpoint, otlptracehttp.WithEndpointURL)...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP %s trace exporter: %w", t.protocol, err)
	}
	return exp, nil
}

// newMetricExporter returns the OTLP metric exporter asked for, or nil for
// none. It follows the same precedence as traces, with the METRICS
// variables (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, OTEL_METRICS_EXPORTER).
func newMetricExporter(ctx context.Context, cfg config.TelemetryConfig, env config.LookupEnv) (sdkmetric.Exporter, error) {
	t, err := resolveOTLP(cfg, env, signalMetrics)
	if t == nil || err != nil {
		return nil, err
	}
	if t.protocol == config.ProtocolGRPC {
		exp, err := otlpmetricgrpc.New(ctx, endpointOption(t.endpoint, otlpmetricgrpc.WithEndpointURL)...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP %s metric exporter: %w", t.protocol, err)
		}
		return exp, nil
	}
	exp, err := otlpmetrichttp.New(ctx, endpointOption(t.endpoint, otlpmetrichttp.WithEndpointURL)...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP %s metric exporter: %w", t.protocol, err)
	}
	return exp, nil
}

// endpointOption turns an endpoint URL into an exporter's option list:
// none when the URL is empty, so the exporter reads OTEL_* itself.
func endpointOption[O any](endpoint string, withURL func(string) O) []O {
	if endpoint == "" {
		return nil
	}
	return []O{withURL(endpoint)}
}

// endpointURL accepts "host:port" or a URL and returns a URL; a bare
// host:port means plain HTTP, as collectors on localhost usually are.
func endpointURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", &InputError{Err: fmt.Errorf("telemetry.otlp_endpoint: want host:port or a URL, got %q", s)}
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
