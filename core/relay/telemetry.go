package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/otelscope"
	"github.com/outboxd/outboxd/internal/store"
)

// Span attributes. The messaging.* keys follow the OpenTelemetry messaging
// semantic conventions; outbox.* are ours.
const (
	attrMessagingSystem      = attribute.Key("messaging.system")
	attrMessagingDestination = attribute.Key("messaging.destination.name") // OpenTelemetry's name: the sink
	attrMessagingMessageID   = attribute.Key("messaging.message.id")
	attrMessagingOperation   = attribute.Key("messaging.operation.name")
	attrMessagingOpType      = attribute.Key("messaging.operation.type")
	attrSinkType             = attribute.Key("outbox.sink.type")
	attrAttempt              = attribute.Key("outbox.attempt")
	attrMaxAttempts          = attribute.Key("outbox.max_attempts")
	attrDedupKey             = attribute.Key("outbox.dedup_key")
	attrRowID                = attribute.Key("outbox.row_id")
	attrOutcome              = attribute.Key("outbox.outcome")
	attrRowsClaimed          = attribute.Key("outbox.rows_claimed")
	attrWaitSeconds          = attribute.Key("outbox.rate_limit.wait_seconds")
)

// messagingSystem is the messaging.system value of delivery spans.
const messagingSystem = "outboxd"

// Delivery outcomes, as span attributes and metric labels.
const (
	outcomeSent        = string(status.Sent)
	outcomeRetry       = "retry"
	outcomeDead        = string(status.Dead)
	outcomeRateLimited = "rate-limited"
	outcomeZombie      = "zombie"
	// outcomeFellBack: the row went to its target's fallback instead.
	outcomeFellBack = "fell-back"
)

// outcomes are every delivery outcome.
var outcomes = []string{outcomeSent, outcomeRetry, outcomeDead, outcomeRateLimited, outcomeZombie, outcomeFellBack}

// startDeliverySpan opens the span of one delivery attempt. ctx holds the
// producer's span context (extracted from the row's headers): by default the
// delivery span is its child, so producer and deliveries form one trace even
// though they run in different processes minutes apart. With
// Config.LinkProducerSpan the delivery starts a trace of its own that links
// to the producer's span instead.
func (r *Relay) startDeliverySpan(ctx context.Context, row *claimedRow, sc SinkConfig, labels *sinkLabels) (context.Context, trace.Span) {
	opts := producerSpan
	if r.cfg.LinkProducerSpan {
		if producer := trace.SpanContextFromContext(ctx); producer.IsValid() {
			opts = []trace.SpanStartOption{producerSpan[0], trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: producer})}
		}
	}
	ctx, span := r.tracer.Start(ctx, labels.spanName, opts...)
	// The attributes are set after the start, and only on a span that
	// records: building them for every delivery of an untraced relay cost
	// ~5% of its CPU in the burn-down profile. (Samplers therefore see
	// the span name and parent only, which is all the SDK's samplers use.)
	if span.IsRecording() {
		span.SetAttributes(
			attrMessagingSystem.String(messagingSystem),
			attrMessagingDestination.String(row.Sink),
			attrMessagingMessageID.String(strconv.FormatInt(row.ID, 10)),
			attrMessagingOperation.String("send"),
			attrMessagingOpType.String("send"),
			attrSinkType.String(sc.Type),
			attrAttempt.Int(row.Attempt),
			attrMaxAttempts.Int(row.MaxAttempts),
			attrDedupKey.String(row.DedupKey),
			attrRowID.Int64(row.ID),
		)
		span.SetAttributes(r.fallbackAttrs(row)...)
	}
	return ctx, span
}

// producerSpan are the start options of a delivery span, made once: a
// variadic option list built per delivery is an allocation per delivery.
var producerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// outcomeAttrs are the outcome attribute of a span, one slice per outcome,
// made once for the same reason.
var outcomeAttrs = func() map[string][]attribute.KeyValue {
	m := make(map[string][]attribute.KeyValue, len(outcomes))
	for _, o := range outcomes {
		m[o] = []attribute.KeyValue{attrOutcome.String(o)}
	}
	return m
}()

// endSpan records the outcome (and error) and ends span; nil is a no-op.
// stored is the error as the row stores it (see storedError), never the
// raw text: that came from outside (a receiver's answer), and an exporter
// refuses a batch with invalid UTF-8 in it.
func endSpan(span trace.Span, outcome string, stored *string) {
	if span == nil {
		return
	}
	span.SetAttributes(outcomeAttrs[outcome]...)
	if stored != nil {
		span.RecordError(errors.New(*stored))
		span.SetStatus(codes.Error, *stored)
	}
	span.End()
}

// relayMetrics are the relay's instruments. Labels are bounded: sink names
// and outcomes only, never ids or keys.
type relayMetrics struct {
	deliveries metric.Int64Counter
	duration   metric.Float64Histogram
	lag        metric.Float64Histogram
	inFlight   metric.Int64UpDownCounter
	pauses     metric.Int64Counter
	// circuitOpens and circuitProbes count the circuit breakers this
	// relay opened and the probes it took (breaker.go).
	circuitOpens  metric.Int64Counter
	circuitProbes metric.Int64Counter
}

// meterProvider is mp, or the global one when mp is nil.
func meterProvider(mp metric.MeterProvider) metric.MeterProvider {
	if mp == nil {
		return otel.GetMeterProvider()
	}
	return mp
}

func newRelayMetrics(mp metric.MeterProvider) (*relayMetrics, error) {
	meter := meterProvider(mp).Meter(otelscope.Name)
	var m relayMetrics
	var errs [7]error
	m.deliveries, errs[0] = meter.Int64Counter("outbox.deliveries",
		metric.WithDescription("Delivery attempts by sink and outcome."))
	m.duration, errs[1] = meter.Float64Histogram("outbox.delivery.duration", metric.WithUnit("s"),
		metric.WithDescription("Time spent in the sink per delivery attempt."),
		metric.WithExplicitBucketBoundaries(store.LatencySecondsBuckets...))
	m.lag, errs[2] = meter.Float64Histogram("outbox.delivery.lag", metric.WithUnit("s"),
		metric.WithDescription("From enqueue to sent, per delivered message."),
		metric.WithExplicitBucketBoundaries(store.LatencySecondsBuckets...))
	m.inFlight, errs[3] = meter.Int64UpDownCounter("outbox.deliveries.in_flight",
		metric.WithDescription("Deliveries running now."))
	m.pauses, errs[4] = meter.Int64Counter("outbox.rate_limit.pauses",
		metric.WithDescription("Cluster-wide sink pauses requested by a Retry-After."))
	m.circuitOpens, errs[5] = meter.Int64Counter("outbox.sink.circuit_opens",
		metric.WithDescription("Circuit breakers this relay opened: a receiver looked down."))
	m.circuitProbes, errs[6] = meter.Int64Counter("outbox.sink.circuit_probes",
		metric.WithDescription("Probes of open circuit breakers this relay delivered."))
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("outbox: create metrics: %w", err)
		}
	}
	return &m, nil
}

// sinkLabels are one sink's metric attribute sets, and its delivery
// span's name, built once per relay: an attribute set costs allocations and
// hashing, and a relay records several measurements per delivery. Each set
// is held as the option slice the instruments take, so that passing it
// allocates no variadic slice per call.
type sinkLabels struct {
	spanName  string                // "send <sink>"
	inFlight  []metric.AddOption    // sink name and type
	sink      []metric.AddOption    // sink name
	sinkRec   []metric.RecordOption // sink name
	sinkObs   []metric.ObserveOption
	byOutcome map[string]outcomeLabels // sink name and outcome
}

// outcomeLabels is the sink name and an outcome, for counters and
// histograms.
type outcomeLabels struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newSinkLabels(sc SinkConfig) *sinkLabels {
	name := otelscope.AttrSink.String(sc.Name)
	sink := metric.WithAttributes(name)
	l := &sinkLabels{
		spanName:  "send " + sc.Name,
		inFlight:  []metric.AddOption{metric.WithAttributes(name, attrSinkType.String(sc.Type))},
		sink:      []metric.AddOption{sink},
		sinkRec:   []metric.RecordOption{sink},
		sinkObs:   []metric.ObserveOption{sink},
		byOutcome: make(map[string]outcomeLabels, len(outcomes)),
	}
	for _, outcome := range outcomes {
		attrs := metric.WithAttributes(name, attrOutcome.String(outcome))
		l.byOutcome[outcome] = outcomeLabels{add: []metric.AddOption{attrs}, rec: []metric.RecordOption{attrs}}
	}
	return l
}

func (m *relayMetrics) recordDelivery(ctx context.Context, createdAt time.Time, labels *sinkLabels, outcome string, elapsed time.Duration) {
	attrs := labels.byOutcome[outcome]
	m.deliveries.Add(ctx, 1, attrs.add...)
	if elapsed > 0 {
		m.duration.Record(ctx, elapsed.Seconds(), attrs.rec...)
	}
	switch outcome {
	case outcomeSent:
		m.lag.Record(ctx, time.Since(createdAt).Seconds(), labels.sinkRec...)
	case outcomeRateLimited:
		m.pauses.Add(ctx, 1, labels.sink...)
	}
}
