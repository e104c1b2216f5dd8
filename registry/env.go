package registry

import (
	"context"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/outboxd/outboxd/core/sink"
)

// logAttrSink is the attribute that names the sink on its logger's
// records, as the relay's records name it.
const logAttrSink = "sink"

// environment returns env, the environment a host gave the sink called
// name, with what the host left zero filled in: the process's logger (see
// processLogger), the tracer provider of the span each of the sink's spans
// is a child of (see spanTracerProvider), and OpenTelemetry's global meter
// provider, which hands its work to the provider a serving process
// installs later. The logger is named for the sink. Resources stay nil
// when the host shares none.
func environment(name string, env sink.Env) sink.Env {
	if env.Logger == nil {
		env.Logger = processLogger
	}
	env.Logger = env.Logger.With(logAttrSink, name)
	if env.TracerProvider == nil {
		env.TracerProvider = spanTracerProvider{}
	}
	if env.MeterProvider == nil {
		env.MeterProvider = otel.GetMeterProvider()
	}
	return env
}

// spanTracerProvider is the tracer provider of a sink whose host gave
// none. Each span it starts is started by the provider of its parent, the
// relay's delivery span, so that the sink's spans (an HTTP call, an SMTP
// session) join the trace the relay records with whichever provider the
// relay was given, not only OpenTelemetry's global one; a span without a
// parent goes to the global provider.
type spanTracerProvider struct{ embedded.TracerProvider }

func (spanTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return spanTracer{name: name, opts: opts}
}

// spanTracer is a tracer of spanTracerProvider: it picks the provider at
// each Start, from the context the span starts in.
type spanTracer struct {
	embedded.Tracer
	name string
	opts []trace.TracerOption
}

func (t spanTracer) Start(ctx context.Context, spanName string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	tp := otel.GetTracerProvider()
	if parent := trace.SpanFromContext(ctx); parent.SpanContext().IsValid() {
		tp = parent.TracerProvider()
	}
	return tp.Tracer(t.name, t.opts...).Start(ctx, spanName, opts...)
}

// processLogger writes each record through slog.Default as it is when the
// record is written. Sinks are built while the configuration loads,
// before the serving process has made its logger, which it makes again at
// each reload (its scrubber learns the new configuration's secrets) and
// installs with slog.SetDefault: a sink's logger must follow it.
var processLogger = slog.New(followDefault{})

// followDefault is the slog.Handler of processLogger: the handler of
// slog.Default at the time of each record, with the attributes and groups
// given to this one applied to it (derive).
type followDefault struct {
	derive func(slog.Handler) slog.Handler // nil: the default's as it is
}

func (h followDefault) handler() slog.Handler {
	base := slog.Default().Handler()
	if h.derive == nil {
		return base
	}
	return h.derive(base)
}

// Enabled asks the default's handler: attributes and groups do not change
// the level it writes.
func (h followDefault) Enabled(ctx context.Context, level slog.Level) bool {
	return slog.Default().Handler().Enabled(ctx, level)
}

func (h followDefault) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h followDefault) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.then(func(base slog.Handler) slog.Handler { return base.WithAttrs(attrs) })
}

func (h followDefault) WithGroup(name string) slog.Handler {
	return h.then(func(base slog.Handler) slog.Handler { return base.WithGroup(name) })
}

// then returns h with step applied after what h applies already.
func (h followDefault) then(step func(slog.Handler) slog.Handler) followDefault {
	before := h.derive
	if before == nil {
		return followDefault{derive: step}
	}
	return followDefault{derive: func(base slog.Handler) slog.Handler { return step(before(base)) }}
}

// Resources are the resources a host shares with the sinks it builds
// (sink.Env.Resources), each published under the name the package that
// uses it documents. A host builds its sinks with a Resources before it
// has everything in it, and publishes a resource once it has it: the
// sinks look it up when they need it. The zero value holds none; it is
// safe for concurrent use.
type Resources struct {
	mu     sync.RWMutex
	byName map[string]any
}

var _ sink.Resources = (*Resources)(nil)

// Publish makes v the resource called name, for every sink built with r,
// before or after.
func (r *Resources) Publish(name string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = map[string]any{}
	}
	r.byName[name] = v
}

// Resource returns the resource published as name, and whether there is
// one yet.
func (r *Resources) Resource(name string) (any, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.byName[name]
	return v, ok
}
