package sinks

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/sink"
)

// traceContext is the W3C Trace Context propagator (traceparent,
// tracestate). It is fixed, as in core, rather than the global propagator,
// so consumers get a trace context even when the program set none.
var traceContext = propagation.TraceContext{}

// MessageHeaders returns the headers a broker message for d carries: the
// row's own headers (metadata its producer attached) with the trace
// context of the relay's delivery span in place of the producer's: d's own
// [sink.Delivery.Context] when it has a span (in a batch, each delivery
// has its own), else ctx. A consumer that extracts it continues the trace
// as a child of the delivery, itself a child of the producer's span.
func MessageHeaders(ctx context.Context, d *sink.Delivery) map[string]string {
	if trace.SpanContextFromContext(d.Context()).IsValid() {
		ctx = d.Context()
	}
	h := make(map[string]string, len(d.Headers)+2)
	maps.Copy(h, d.Headers)
	for _, k := range traceContext.Fields() {
		delete(h, k)
	}
	traceContext.Inject(ctx, propagation.MapCarrier(h))
	return h
}
