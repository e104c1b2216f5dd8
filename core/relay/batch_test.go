package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// batchSink records the batches it is handed and fails the deliveries its
// fail function names.
type batchSink struct {
	mu      sync.Mutex
	batches [][]string // dedup keys per call
	spans   []trace.SpanContext
	fail    func(key string) error
}

func (s *batchSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	errs := s.DeliverBatch(ctx, []*sink.Delivery{d})
	return errs[0]
}

func (s *batchSink) DeliverBatch(_ context.Context, ds []*sink.Delivery) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, len(ds))
	errs := make([]error, len(ds))
	for i, d := range ds {
		keys[i] = d.DedupKey
		s.spans = append(s.spans, trace.SpanContextFromContext(d.Context()))
		if s.fail != nil {
			errs[i] = s.fail(d.DedupKey)
		}
	}
	s.batches = append(s.batches, keys)
	return errs
}

// A BatchSink gets a claim's rows in one call, each with a span of its own,
// and each row takes its own outcome: one permanent failure, one retry, the
// rest sent.
func TestBatchSinkGetsClaimedRowsTogether(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	var once sync.Once
	fake := &batchSink{fail: func(key string) error {
		switch key {
		case "k-3":
			return sink.Permanent(errors.New("refused"))
		case "k-5":
			var err error
			once.Do(func() { err = errors.New("try again") })
			return err
		}
		return nil
	}}
	const n = 50
	b.EnqueueN(t, "brk", n, nil) // all waiting before the relay's first claim
	cfg := tm.relayConfig(b, relay.SinkConfig{Name: "brk", Sink: fake, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)
	signals.Written.Wait(t, 20*time.Second, "every row finished", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "sent")+relaysignal.CountWritten(all, "dead") == n
	})
	if c := b.StatusCounts(t); c["sent"] != n-1 || c["dead"] != 1 {
		t.Fatalf("statuses %v, want %d sent and 1 dead", c, n-1)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.batches[0]) != n {
		t.Fatalf("first batch of %d rows, want all %d claimed together (batches: %v)", len(fake.batches[0]), n, fake.batches)
	}
	seen := map[trace.SpanID]bool{}
	for _, sc := range fake.spans {
		if !sc.IsValid() || seen[sc.SpanID()] {
			t.Fatalf("a delivery of the batch lacks a span of its own: %v", sc)
		}
		seen[sc.SpanID()] = true
	}
	if got := len(tm.Ended("send brk")); got < n {
		t.Fatalf("%d delivery spans ended, want one per row at least (%d)", got, n)
	}
}

// panickingBatchSink panics in every batch.
type panickingBatchSink struct{ sink.Func }

func (panickingBatchSink) DeliverBatch(context.Context, []*sink.Delivery) []error {
	panic("batch boom")
}

// A panic in DeliverBatch fails every delivery of the batch, retryably; the
// relay keeps running.
func TestBatchSinkPanicFailsTheBatch(t *testing.T) {
	b := coretest.Setup(t)
	fake := panickingBatchSink{}
	b.EnqueueN(t, "brk", 3, nil)
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{
		Sinks: []relay.SinkConfig{{Name: "brk", Sink: fake, MaxAttempts: 1}}})
	signals.Written.Wait(t, 10*time.Second, "3 dead", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "dead") == 3
	})
	dead, err := b.Outbox.DeadLetters(b.Ctx, b.Pool, operator.DeadLetterFilter{})
	if err != nil || len(dead) != 3 || dead[0].LastError != "sink panicked: batch boom" {
		t.Fatalf("dead letters %+v, %v", dead, err)
	}
}
