package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/webhook"
	"github.com/outboxd/outboxd/test/tracing"
)

// queryTimeout bounds the wait for the whole trace to show up in Jaeger
// (the SDK's batcher and Jaeger's batch processor both hold spans a while).
const queryTimeout = 30 * time.Second

// A producer enqueues inside its span; the relay delivers to a webhook that
// fails once and then accepts. Jaeger must show one trace: the producer's
// span, under it two delivery spans (retry, then sent) with the outbox
// attributes, and under each the webhook's HTTP client span.
func TestDeliveryTraceInJaeger(t *testing.T) {
	t.Parallel()
	jaeger := tracing.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tp := newTracerProvider(t, jaeger, "outboxd-tracing-test")
	pool, ob := testdb.New(t)

	var calls atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	// The path stands for a credential embedded in the URL, as in Slack's
	// incoming webhooks: it must not reach the tracing backend.
	const secretPath = "/hooks/s3cr3t-token"
	sink, err := webhook.Type.New("hooks", map[string]any{"url": receiver.URL + secretPath, "allow_private": true}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
		Sinks: []relay.SinkConfig{{Name: "hooks", Type: "webhook", Sink: sink, MaxAttempts: 3,
			Backoff: relay.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}}},
		PollInterval:   20 * time.Millisecond,
		TracerProvider: tp,
	})

	producerCtx, producer := tp.Tracer("producer").Start(ctx, "POST /orders")
	res, err := ob.Enqueue(producerCtx, pool, outboxd.Message{Sink: "hooks", DedupKey: "order-42", Payload: map[string]int{"order": 42}})
	producer.End()
	if err != nil {
		t.Fatal(err)
	}
	traceID := producer.SpanContext().TraceID().String()
	// Both attempts' spans have ended once the second one's outcome is
	// written (the first one's was written before it was retried).
	signals.WaitWritten(t, time.Minute, "hooks", "sent", 1)

	tr := waitForTrace(t, ctx, jaeger, tp, traceID, func(tr tracing.Trace) bool {
		return len(tr.Named("send hooks")) == 2 && len(tr.Named("HTTP POST")) == 2
	})
	roots := tr.Named("POST /orders")
	if len(roots) != 1 {
		t.Fatalf("trace %s has %d producer spans, want 1", traceID, len(roots))
	}
	deliveries := tr.Children(roots[0])
	if len(deliveries) != 2 {
		t.Fatalf("producer span has %d children, want the 2 delivery spans", len(deliveries))
	}
	byAttempt := map[string]tracing.Span{}
	for _, d := range deliveries {
		byAttempt[d.Tag("outbox.attempt")] = d
	}
	for attempt, want := range map[string]struct{ outcome, httpStatus, errTag string }{
		"1": {"retry", "500", "true"},
		"2": {"sent", "204", ""},
	} {
		d, ok := byAttempt[attempt]
		if !ok {
			t.Errorf("no delivery span for attempt %s", attempt)
			continue
		}
		tags := map[string]string{
			"span.kind":                  "producer",
			"messaging.system":           "outboxd",
			"messaging.destination.name": "hooks",
			"messaging.message.id":       strconv.FormatInt(res.ID, 10),
			"messaging.operation.name":   "send",
			"outbox.sink.type":           "webhook",
			"outbox.max_attempts":        "3",
			"outbox.dedup_key":           "order-42",
			"outbox.row_id":              strconv.FormatInt(res.ID, 10),
			"outbox.outcome":             want.outcome,
			"error":                      want.errTag,
		}
		for k, v := range tags {
			if got := d.Tag(k); got != v {
				t.Errorf("attempt %s: tag %s = %q, want %q", attempt, k, got, v)
			}
		}
		calls := tr.Children(d)
		if len(calls) != 1 || calls[0].OperationName != "HTTP POST" || calls[0].Tag("span.kind") != "client" {
			t.Errorf("attempt %s: children %v, want one HTTP POST client span", attempt, names(calls))
			continue
		}
		if got := calls[0].Tag("http.response.status_code"); got != want.httpStatus {
			t.Errorf("attempt %s: HTTP span status code %q, want %s", attempt, got, want.httpStatus)
		}
		if u := calls[0].Tag("url.full"); u == "" || strings.Contains(u, "s3cr3t") {
			t.Errorf("attempt %s: HTTP span url.full = %q, want the URL with its path redacted", attempt, u)
		}
	}
}

// newTracerProvider exports to jaeger over OTLP/HTTP, as outboxd does by
// default, and flushes when the test ends.
func newTracerProvider(t *testing.T, jaeger *tracing.Jaeger, service string) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpoint(jaeger.OTLPHTTP), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// waitForTrace flushes tp and polls Jaeger until the trace satisfies
// complete, failing the test at queryTimeout. It polls: Jaeger is another
// process, which stores what it receives in batches of its own.
func waitForTrace(t *testing.T, ctx context.Context, jaeger *tracing.Jaeger, tp *sdktrace.TracerProvider,
	traceID string, complete func(tracing.Trace) bool) tracing.Trace {
	t.Helper()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush spans: %v", err)
	}
	deadline := time.Now().Add(queryTimeout)
	var last tracing.Trace
	for {
		tr, found, err := jaeger.Trace(ctx, traceID)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			if complete(tr) {
				return tr
			}
			last = tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s incomplete in Jaeger after %s; spans: %v", traceID, queryTimeout, names(last.Spans))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func names(spans []tracing.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.OperationName
	}
	return out
}
