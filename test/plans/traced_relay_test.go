package plans_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// tracedRelay is a relay of the tests' schema delivering sink fast's
// messages to a sink that returns at once, its spans recorded.
type tracedRelay struct {
	spans     *tracetest.SpanRecorder
	delivered atomic.Int64
}

// runTracedRelay starts a tracedRelay on pool for schema until the test
// ends, claiming up to batchSize rows at a time.
func runTracedRelay(t *testing.T, pool *pgxpool.Pool, schema string, batchSize int) *tracedRelay {
	t.Helper()
	r := &tracedRelay{spans: tracetest.NewSpanRecorder()}
	tracing := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	t.Cleanup(func() { _ = tracing.Shutdown(context.Background()) })
	fast := sink.Func(func(context.Context, *sink.Delivery) error { r.delivered.Add(1); return nil })
	testrelay.Run(t, pool, schema, relay.Config{BatchSize: batchSize, TracerProvider: tracing,
		Sinks: []relay.SinkConfig{{Name: "fast", Sink: fast}}})
	return r
}

// claimsSince returns the durations of the relay's claims (its "outbox
// claim" spans) that started after since, shortest first.
func (r *tracedRelay) claimsSince(since time.Time) []time.Duration {
	var claims []time.Duration
	for _, s := range r.spans.Ended() {
		if s.Name() == "outbox claim" && s.StartTime().After(since) {
			claims = append(claims, s.EndTime().Sub(s.StartTime()))
		}
	}
	slices.Sort(claims)
	return claims
}
