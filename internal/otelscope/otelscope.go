// Package otelscope declares, once, what the engine's packages share in
// their telemetry: the instrumentation scope of their tracers and meters
// (one scope, as when they were a single package) and the sink label.
package otelscope

import "go.opentelemetry.io/otel/attribute"

// Name is the instrumentation scope of every tracer and meter of the engine.
const Name = "github.com/outboxd/outboxd"

// AttrSink labels spans and series with a sink name.
const AttrSink = attribute.Key("sink")
