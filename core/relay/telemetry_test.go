package relay_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// telemetry is coretest's in-memory providers with what the relay's tests
// add: waiting for delivery spans, a relay recording into them, and a
// producer span.
type telemetry struct{ coretest.Telemetry }

func newTelemetry(t *testing.T) telemetry {
	t.Helper()
	return telemetry{coretest.NewTelemetry(t)}
}

// waitSpans waits until n delivery attempts of sink have ended (written or
// found to be a zombie's) and returns the ended delivery spans of sink, in
// the order they ended. A delivery span ends before its outcome is
// signalled, and the syncer exports it as it ends.
func (tm telemetry) waitSpans(t *testing.T, signals *relaysignal.Relay, sink string, n int) tracetest.SpanStubs {
	t.Helper()
	signals.Written.Wait(t, 30*time.Second, strconv.Itoa(n)+" attempts of sink "+sink, func(all []relaysignal.Outcome) bool {
		attempts := 0
		for _, o := range all {
			if o.Sink == sink {
				attempts++
			}
		}
		return attempts >= n
	})
	spans := tm.Ended("send " + sink)
	if len(spans) < n {
		t.Fatalf("%d delivery spans of sink %s ended, want %d: one per attempt", len(spans), sink, n)
	}
	return spans
}

// relayConfig is a fast-polling relay with one sink, recording into tm.
func (tm telemetry) relayConfig(b coretest.Bundle, sink relay.SinkConfig) relay.Config {
	if sink.Type == "" {
		sink.Type = "test"
	}
	if sink.Backoff == (relay.Backoff{}) {
		sink.Backoff = relay.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}
	}
	return relay.Config{
		Sinks:          []relay.SinkConfig{sink},
		PollInterval:   20 * time.Millisecond,
		TracerProvider: tm.TracerProvider,
		MeterProvider:  tm.MeterProvider,
	}
}

// produce enqueues one message for sink inside a producer span and returns
// the row id and the producer's span context.
func (tm telemetry) produce(t *testing.T, b coretest.Bundle, sink, key string) (int64, trace.SpanContext) {
	t.Helper()
	ctx, span := tm.TracerProvider.Tracer("producer").Start(b.Ctx, "POST /orders")
	defer span.End()
	res, err := b.Outbox.Enqueue(ctx, b.Pool, outboxd.Message{Sink: sink, DedupKey: key, Payload: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID, span.SpanContext()
}

// failOnce fails the first delivery of every row with err. It counts calls,
// not attempts: a RetryAfter gives the attempt back.
func failOnce(err error) func(d *sink.Delivery) error {
	var seen sync.Map
	return func(d *sink.Delivery) error {
		if _, again := seen.LoadOrStore(d.ID, true); again {
			return nil
		}
		return err
	}
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestDeliverySpansAreChildrenOfTheProducerSpan(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	rec := coretest.NewRecordingSink()
	rec.Fail = failOnce(errors.New("receiver said 500"))
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), tm.relayConfig(b, relay.SinkConfig{Name: "hooks", Sink: rec, MaxAttempts: 4}))

	id, producer := tm.produce(t, b, "hooks", "order-42")
	spans := tm.waitSpans(t, signals, "hooks", 2)
	if len(spans) != 2 {
		t.Fatalf("got %d delivery spans, want 2", len(spans))
	}
	if got := rec.Snapshot()[0].Headers["traceparent"]; !strings.Contains(got, producer.TraceID().String()) {
		t.Errorf("delivery headers carry traceparent %q, want the producer's trace %s", got, producer.TraceID())
	}
	for i, s := range spans {
		attempt := i + 1
		if s.SpanContext.TraceID() != producer.TraceID() || s.Parent.SpanID() != producer.SpanID() {
			t.Errorf("attempt %d: span is in trace %s under %s, want a child of the producer span %s/%s",
				attempt, s.SpanContext.TraceID(), s.Parent.SpanID(), producer.TraceID(), producer.SpanID())
		}
		if s.SpanKind != trace.SpanKindProducer {
			t.Errorf("attempt %d: span kind %s, want producer", attempt, s.SpanKind)
		}
		want := map[attribute.Key]attribute.Value{
			"messaging.system":           attribute.StringValue("outboxd"),
			"messaging.destination.name": attribute.StringValue("hooks"),
			"messaging.message.id":       attribute.StringValue(strconv.FormatInt(id, 10)),
			"messaging.operation.name":   attribute.StringValue("send"),
			"messaging.operation.type":   attribute.StringValue("send"),
			"outbox.sink.type":           attribute.StringValue("test"),
			"outbox.attempt":             attribute.IntValue(attempt),
			"outbox.max_attempts":        attribute.IntValue(4),
			"outbox.dedup_key":           attribute.StringValue("order-42"),
			"outbox.row_id":              attribute.Int64Value(id),
			"outbox.outcome":             attribute.StringValue([]string{"retry", "sent"}[i]),
		}
		got := attrsOf(s)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("attempt %d: %s = %v, want %v", attempt, k, got[k].String(), v.String())
			}
		}
	}
	failed, sent := spans[0], spans[1]
	if failed.Status.Code != codes.Error || len(failed.Events) == 0 || failed.Events[0].Name != "exception" {
		t.Errorf("failed attempt: status %v, events %v; want an error status and a recorded exception", failed.Status, failed.Events)
	}
	if sent.Status.Code == codes.Error || len(sent.Events) != 0 {
		t.Errorf("sent attempt: status %v, events %v; want no error", sent.Status, sent.Events)
	}
}

func TestLinkProducerSpanStartsANewTraceLinkedToTheProducer(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	cfg := tm.relayConfig(b, relay.SinkConfig{Name: "hooks", Sink: coretest.NewRecordingSink()})
	cfg.LinkProducerSpan = true
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)

	_, producer := tm.produce(t, b, "hooks", "k")
	s := tm.waitSpans(t, signals, "hooks", 1)[0]
	if s.SpanContext.TraceID() == producer.TraceID() || s.Parent.IsValid() {
		t.Errorf("delivery span in trace %s with parent %v, want the root of a new trace", s.SpanContext.TraceID(), s.Parent)
	}
	// The link's span context came out of the row's headers, so it is marked
	// remote; the ids are what must match.
	if len(s.Links) != 1 || s.Links[0].SpanContext.TraceID() != producer.TraceID() ||
		s.Links[0].SpanContext.SpanID() != producer.SpanID() {
		t.Errorf("delivery span links %v, want one link to the producer span %v", s.Links, producer)
	}
}

func TestDeliverySpanOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail error
		want []string // outcome per attempt span, in the order they end
	}{
		{"dead", sink.Permanent(errors.New("unknown channel")), []string{"dead"}},
		{"rate-limited", sink.RetryAfter(50*time.Millisecond, errors.New("429")), []string{"rate-limited", "sent"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := coretest.Setup(t)
			tm := newTelemetry(t)
			rec := coretest.NewRecordingSink()
			rec.Fail = failOnce(c.fail)
			signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), tm.relayConfig(b, relay.SinkConfig{Name: "s", Sink: rec}))
			tm.produce(t, b, "s", "k")
			spans := tm.waitSpans(t, signals, "s", len(c.want))
			for i, want := range c.want {
				if got := attrsOf(spans[i])["outbox.outcome"].AsString(); got != want {
					t.Errorf("span %d: outcome %q, want %q", i, got, want)
				}
			}
		})
	}
}

// A delivery whose relay overran its lease is re-claimed and delivered
// again; the late result of the first attempt changes nothing and its span
// says so.
func TestDeliverySpanOutcomeZombie(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	release := make(chan struct{})
	var unblock sync.Once
	// The first attempt to reach the sink is held there past its lease.
	// Usually that is attempt 1; on a loaded machine attempt 1's claim may
	// come back too close to its lease's end to start, and it is handed
	// back unsent (CI saw it), so the held attempt is whichever came first.
	var held atomic.Int64
	rec := coretest.NewRecordingSink()
	rec.Fail = func(d *sink.Delivery) error {
		if held.CompareAndSwap(0, int64(d.Attempt)) {
			<-release // a sink that ignores its deadline
		}
		return nil
	}
	cfg := tm.relayConfig(b, relay.SinkConfig{Name: "slow", Sink: rec})
	cfg.Lease = 300 * time.Millisecond
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)
	// Runs before the relay's cleanup, so a failing test does not leave
	// the stuck delivery holding up the relay's shutdown.
	t.Cleanup(func() { unblock.Do(func() { close(release) }) })
	tm.produce(t, b, "slow", "k")

	attempt := func(s tracetest.SpanStub) int64 { return attrsOf(s)["outbox.attempt"].AsInt64() }
	// Spans end in order: the re-claimed attempt's, while the held one is
	// still at the sink, comes before the held one's. Attempts handed back
	// unsent may end before either; a few at most.
	const handedBackAtMost = 5
	ended := 0
	for reclaimed := false; !reclaimed; {
		if ended++; ended > handedBackAtMost+2 {
			t.Fatalf("%d delivery spans ended without the held attempt's re-claim among them", ended-1)
		}
		last := tm.waitSpans(t, signals, "slow", ended)[ended-1]
		switch h := held.Load(); {
		case h != 0 && attempt(last) == h:
			t.Fatalf("the held attempt %d ended first, want the re-claimed attempt %d", h, h+1)
		case h != 0 && attempt(last) > h:
			reclaimed = true
		}
	}
	unblock.Do(func() { close(release) })
	zombie := tm.waitSpans(t, signals, "slow", ended+1)[ended]
	if got, want := attempt(zombie), held.Load(); got != want {
		t.Fatalf("span ended after the re-claim is attempt %d, want the held attempt %d", got, want)
	}
	if got := attrsOf(zombie)["outbox.outcome"].AsString(); got != "zombie" {
		t.Errorf("late attempt %d: outcome %q, want zombie", held.Load(), got)
	}
}

func TestClaimAndRateLimitWaitSpans(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	rec := coretest.NewRecordingSink()
	// 20 per second, burst 1: of three rows claimed together, the later two
	// wait for their permits.
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), tm.relayConfig(b, relay.SinkConfig{Name: "slow", Sink: rec,
		RateLimit: &sink.RateLimit{Rate: 20, Per: time.Second, Burst: 1}}))
	b.EnqueueN(t, "slow", 3, nil)

	deliveries := tm.waitSpans(t, signals, "slow", 3)
	// A rate-limit wait span ends before its delivery starts.
	waits := tm.Ended("outbox rate_limit wait")
	if len(waits) == 0 {
		t.Fatal("no rate-limit wait span, although two of three rows claimed together waited for permits")
	}
	parents := map[trace.SpanID]bool{}
	for _, d := range deliveries {
		parents[d.SpanContext.SpanID()] = true
	}
	for _, w := range waits {
		if !parents[w.Parent.SpanID()] {
			t.Errorf("rate-limit wait span's parent %s is not a delivery span", w.Parent.SpanID())
		}
		if secs := attrsOf(w)["outbox.rate_limit.wait_seconds"].AsFloat64(); secs <= 0 {
			t.Errorf("rate-limit wait span records %v seconds, want > 0", secs)
		}
	}
	claimed := int64(0)
	for _, c := range tm.Ended("outbox claim") {
		claimed += attrsOf(c)["outbox.rows_claimed"].AsInt64()
	}
	if claimed != 3 {
		t.Errorf("claim spans report %d rows claimed, want 3", claimed)
	}
}

func TestRelayMetrics(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	rec := coretest.NewRecordingSink()
	flaky, limited := failOnce(errors.New("flaky")), failOnce(sink.RetryAfter(20*time.Millisecond, nil))
	rec.Fail = func(d *sink.Delivery) error {
		switch d.DedupKey {
		case "k-0":
			return flaky(d)
		case "k-1":
			return limited(d)
		}
		return nil
	}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), tm.relayConfig(b, relay.SinkConfig{Name: "m", Sink: rec}))
	b.EnqueueN(t, "m", 3, nil)
	// Every row sent: the retry and the rate-limited attempt came before
	// their rows' sends. (Counting written outcomes alone could stop early:
	// a row handed back while the Retry-After pause held is one too.)
	signals.Written.Wait(t, 30*time.Second, "3 rows sent", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "sent") == 3
	})
	tm.waitSpans(t, signals, "m", 5) // 3 sent, a retry and a rate-limited attempt

	rm := tm.Collect(t)
	sink0 := attribute.String("sink", "m")
	wantDeliveries := map[attribute.Distinct]int64{
		coretest.Labels(sink0, attribute.String("outbox.outcome", "sent")):         3,
		coretest.Labels(sink0, attribute.String("outbox.outcome", "retry")):        1,
		coretest.Labels(sink0, attribute.String("outbox.outcome", "rate-limited")): 1,
	}
	got := coretest.SumByAttrs(t, rm, "outbox.deliveries")
	for k, want := range wantDeliveries {
		if got[k] != want {
			t.Errorf("outbox.deliveries%v = %d, want %d (all: %v)", k, got[k], want, got)
		}
	}
	if got := coretest.SumByAttrs(t, rm, "outbox.rate_limit.pauses")[coretest.Labels(sink0)]; got != 1 {
		t.Errorf("outbox.rate_limit.pauses = %d, want 1", got)
	}
	for k, v := range coretest.SumByAttrs(t, rm, "outbox.deliveries.in_flight") {
		if v != 0 {
			t.Errorf("outbox.deliveries.in_flight%v = %d after all deliveries ended, want 0", k, v)
		}
	}
	for name, want := range map[string]uint64{"outbox.delivery.duration": 5, "outbox.delivery.lag": 3} {
		m, ok := coretest.FindMetric(rm, name)
		if !ok {
			t.Errorf("no %s recorded", name)
			continue
		}
		var n uint64
		for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			n += p.Count
		}
		if n != want {
			t.Errorf("%s has %d observations, want %d", name, n, want)
		}
	}
}

// boundedLabels are the only metric attribute keys allowed: each takes
// values from a set fixed by configuration or code, never from a row.
// reason is the pause gauge's: "hand" or "retry_after".
var boundedLabels = map[attribute.Key]bool{"sink": true, "outbox.sink.type": true, "outbox.outcome": true, "status": true, "reason": true}

// Ids and dedup keys belong on spans, where every value is fine; on metrics
// each distinct value is a new time series, and span names are indexed by
// tracing backends the same way.
func TestTelemetryCardinalityIsBounded(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	rec := coretest.NewRecordingSink()
	flaky := failOnce(errors.New("flaky"))
	rec.Fail = func(d *sink.Delivery) error {
		if d.DedupKey == "k-1" {
			return sink.Permanent(errors.New("bad payload"))
		}
		return flaky(d)
	}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), tm.relayConfig(b, relay.SinkConfig{Name: "c", Sink: rec, RateLimit: &sink.RateLimit{Rate: 100, Per: time.Second}}))
	reg, err := b.Outbox.RegisterGauges(tm.MeterProvider, b.Pool, operator.GaugeConfig{Sinks: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	ids := b.EnqueueN(t, "c", 5, nil)
	b.EnqueueN(t, "nowhere", 2, nil) // unconfigured: left pending
	signals.WaitWritten(t, 30*time.Second, "c", "sent", 4)
	signals.WaitWritten(t, 30*time.Second, "c", "dead", 1)
	if c := b.StatusCounts(t); c["sent"] != 4 || c["dead"] != 1 || c["pending"] != 2 {
		t.Fatalf("rows %v, want 4 sent, 1 dead and the unconfigured sink's 2 pending", c)
	}

	rowValues := map[string]bool{"nowhere": true}
	for i, id := range ids {
		rowValues[strconv.FormatInt(id, 10)] = true
		rowValues["k-"+strconv.Itoa(i)] = true
	}
	rm := tm.Collect(t)
	series := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, set := range pointAttributes(m.Data) {
				series++
				for _, kv := range set.ToSlice() {
					if !boundedLabels[kv.Key] {
						t.Errorf("metric %s has label %s: not one of the bounded labels", m.Name, kv.Key)
					}
					if rowValues[kv.Value.String()] {
						t.Errorf("metric %s labels %s with a row's value %q", m.Name, kv.Key, kv.Value.String())
					}
				}
			}
		}
	}
	if series == 0 {
		t.Fatal("no metric points collected")
	}
	for _, s := range tm.Spans.GetSpans() {
		for v := range rowValues {
			if strings.Contains(s.Name, v) {
				t.Errorf("span name %q holds the row's value %q", s.Name, v)
			}
		}
	}
}

// pointAttributes returns the attribute sets of a metric's data points.
// Every metricdata aggregation holds a DataPoints slice of structs with an
// Attributes field; reflection reads them all without a case per type.
func pointAttributes(data metricdata.Aggregation) []attribute.Set {
	points := reflect.ValueOf(data).FieldByName("DataPoints")
	sets := make([]attribute.Set, points.Len())
	for i := range sets {
		sets[i] = points.Index(i).FieldByName("Attributes").Interface().(attribute.Set)
	}
	return sets
}
