package brokertest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// Tracing records the spans of a test's producer and relay.
type Tracing struct {
	Provider *sdktrace.TracerProvider
	Recorder *tracetest.SpanRecorder
}

// NewTracing returns a Tracing that samples every span.
func NewTracing(t testing.TB) *Tracing {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &Tracing{Provider: tp, Recorder: rec}
}

// Enqueue enqueues msgs in one transaction inside a producer span, whose
// context core stores in each row's headers, and returns that context.
func (tr *Tracing) Enqueue(t testing.TB, pool *pgxpool.Pool, ob *testdb.Outbox, msgs []outboxd.Message) trace.SpanContext {
	t.Helper()
	ctx, span := tr.Provider.Tracer("brokertest").Start(context.Background(), "produce")
	defer span.End()
	if _, err := ob.EnqueueBatch(ctx, pool, msgs); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	return span.SpanContext()
}

// CheckTraceContext checks that a broker message's headers continue the
// producer's trace: a W3C traceparent in producer's trace whose parent is
// the relay's delivery span of that message ("send <sink>").
func (tr *Tracing) CheckTraceContext(t testing.TB, sink string, producer trace.SpanContext, r Received) {
	t.Helper()
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(r.Headers)))
	if !sc.IsValid() {
		t.Errorf("%s: no valid traceparent in headers %v", r.ID, r.Headers)
		return
	}
	if sc.TraceID() != producer.TraceID() {
		t.Errorf("%s: trace %s, want the producer's %s", r.ID, sc.TraceID(), producer.TraceID())
	}
	// The delivery span ended before its outcome was signalled, which the
	// caller waited for.
	var delivery sdktrace.ReadOnlySpan
	for _, s := range tr.Recorder.Ended() {
		if s.SpanContext().SpanID() == sc.SpanID() {
			delivery = s
		}
	}
	if delivery == nil {
		t.Errorf("%s: no ended span has the traceparent's span id %s", r.ID, sc.SpanID())
		return
	}
	if delivery.Name() != "send "+sink {
		t.Errorf("%s: the traceparent's span is %q, want the delivery span %q", r.ID, delivery.Name(), "send "+sink)
	}
	if delivery.Parent().SpanID() != producer.SpanID() {
		t.Errorf("%s: the delivery span's parent is %s, want the producer span %s", r.ID, delivery.Parent().SpanID(), producer.SpanID())
	}
}
