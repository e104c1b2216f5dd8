package sink

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Env is the environment a host builds a sink in: where the sink logs,
// traces and measures, and the resources the host shares among its sinks.
// The sink's constructor receives it with the sink's decoded options and
// keeps what it needs; it does no I/O with it (checking a configuration
// builds every sink).
//
// Env is part of the contract rather than of package registry because it
// is what a sink sees of whoever runs it, whether plugins.yaml names the
// sink (the registry builds it) or a Go program builds it directly: a sink
// author needs this package only. Package registry fills what a host
// leaves zero (see registry.Define).
type Env struct {
	// Logger is where the sink logs; its records carry the sink's name.
	Logger *slog.Logger
	// TracerProvider makes the sink's tracers (the spans of its calls to
	// the receiver).
	TracerProvider trace.TracerProvider
	// MeterProvider makes the sink's meters.
	MeterProvider metric.MeterProvider
	// Resources are what the host shares among its sinks (the tenants'
	// destinations directory, for one), by name.
	Resources Resources
}

// Resources are what a host shares among the sinks it builds, each under a
// name its package documents. A host may publish a resource after it has
// built the sinks that use it (the destinations directory needs the
// database, which a configuration check never opens), so a sink looks a
// resource up when it needs it, and treats one not published yet as its
// receiver being unavailable: the delivery fails and is retried.
type Resources interface {
	// Resource returns the resource published under name, and whether
	// there is one yet.
	Resource(name string) (any, bool)
}

// LookupResource returns the resource of r published under name when
// there is one and it is a T; r may be nil (a host that shares nothing).
func LookupResource[T any](r Resources, name string) (T, bool) {
	var zero T
	if r == nil {
		return zero, false
	}
	v, ok := r.Resource(name)
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}
