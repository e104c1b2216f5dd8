package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// digestSink records the digests it accepts, by dedup keys, and the rows
// delivered alone; it refuses the members its refuse function names
// (sink.RefuseMembers).
type digestSink struct {
	mu       sync.Mutex
	accepted [][]string
	alone    []string
	refuse   func(d *sink.Delivery) error
}

func (s *digestSink) Deliver(_ context.Context, d *sink.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alone = append(s.alone, d.DedupKey)
	return nil
}

func (s *digestSink) DeliverDigest(_ context.Context, dg *sink.Digest) error {
	refused := map[int]error{}
	var keys []string
	for i, m := range dg.Members {
		if err := s.refuse(m); err != nil {
			refused[i] = err
		}
		keys = append(keys, m.DedupKey)
	}
	if len(refused) > 0 {
		return sink.RefuseMembers(refused)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted = append(s.accepted, keys)
	return dg.SetReceipt(map[string]int64{"digest": dg.ID})
}

// A member the sink refuses is split out of its digest and dead-lettered
// alone, with the sink's error, while the others go out at once as the
// same digest; the digest's span links to every delivered member's
// producer span, the metrics count one digest of nine members, and the
// lookup of any member names the digest and its siblings.
// (Mutation: treating a refusal like any error fails all ten members and
// retries them together until they are dead; dropping the span links
// leaves the producers' traces without the delivery; finish.sql not
// carrying digest_id into history loses the sent members' digest.)
func TestPoisonMemberIsSplitOutOfItsDigest(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	const n, poison = 10, "key-3"
	producers := map[string]trace.SpanContext{}
	for i := range n {
		key := fmt.Sprintf("key-%d", i)
		_, producers[key] = tm.produce(t, b, "dg", key)
	}
	fake := &digestSink{refuse: func(d *sink.Delivery) error {
		if d.DedupKey == poison {
			return errors.New("this member cannot be posted")
		}
		return nil
	}}
	cfg := tm.relayConfig(b, relay.SinkConfig{Name: "dg", Sink: fake, Digest: &sink.DigestPolicy{MaxMessages: 50}})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)
	signals.Written.Wait(t, 20*time.Second, "every row finished", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "sent")+relaysignal.CountWritten(all, "dead") == n
	})
	if c := b.StatusCounts(t); c["sent"] != n-1 || c["dead"] != 1 {
		t.Fatalf("statuses %v, want %d sent and 1 dead", c, n-1)
	}
	dead, err := b.Outbox.DeadLetters(b.Ctx, b.Pool, operator.DeadLetterFilter{})
	if err != nil || len(dead) != 1 || dead[0].DedupKey != poison || dead[0].Attempts != 1 {
		t.Fatalf("dead letters %+v (%v), want %s alone after one attempt", dead, err, poison)
	}
	fake.mu.Lock()
	accepted := fake.accepted
	fake.mu.Unlock()
	if len(accepted) != 1 || len(accepted[0]) != n-1 || slices.Contains(accepted[0], poison) {
		t.Fatalf("accepted digests %v, want one of the %d others", accepted, n-1)
	}
	var digests, members int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT count(DISTINCT digest_id), count(*) FROM "+b.Outbox.Schema()+".messages_history").Scan(&digests, &members); err != nil {
		t.Fatal(err)
	}
	if digests != 1 || members != n-1 {
		t.Errorf("%d delivered rows in %d digests, want %d in 1", members, digests, n-1)
	}

	// The lookup of any member names the digest and its siblings: the
	// delivered one's include the member split out, which went out in none.
	for _, m := range dead[:1] {
		got, err := b.Outbox.Message(b.Ctx, b.Pool, m.ID)
		if err != nil || got.Digest == nil || len(got.Digest.Siblings) != n-1 || got.Digest.SentAt == nil {
			t.Fatalf("lookup of %s: %+v (%v), want its digest, sent, with %d siblings", poison, got.Digest, err, n-1)
		}
		sibling, err := b.Outbox.Message(b.Ctx, b.Pool, got.Digest.Siblings[0])
		if err != nil || sibling.Status != operator.StatusSent || sibling.Digest == nil || sibling.Digest.ID != got.Digest.ID ||
			!slices.Contains(sibling.Digest.Siblings, m.ID) || sibling.Digest.DeliveryID != fmt.Sprintf("dg/digest-%d", got.Digest.ID) {
			t.Fatalf("lookup of sibling %d: %+v %+v (%v), want sent in digest %d with %d among its siblings", got.Digest.Siblings[0], sibling.Status, sibling.Digest, err, got.Digest.ID, m.ID)
		}
	}

	spans := tm.Ended("send digest dg")
	var sent []attribute.KeyValue
	linked := map[trace.SpanID]bool{}
	for _, s := range spans {
		if attrsOf(s)["outbox.outcome"].AsString() != "sent" {
			continue
		}
		sent = s.Attributes
		for _, l := range s.Links {
			linked[l.SpanContext.SpanID()] = true
		}
	}
	if sent == nil {
		t.Fatalf("no digest span ended sent among %d", len(spans))
	}
	for key, sc := range producers {
		if key != poison && !linked[sc.SpanID()] {
			t.Errorf("the digest's span has no link to %s's producer span", key)
		}
	}
	rm := tm.Collect(t)
	label := coretest.Labels(attribute.String("sink", "dg"))
	if got := coretest.SumByAttrs(t, rm, "outbox.digests")[label]; got != 1 {
		t.Errorf("outbox.digests %d, want 1", got)
	}
	if got := coretest.SumByAttrs(t, rm, "outbox.digest.members")[label]; got != n-1 {
		t.Errorf("outbox.digest.members %d, want %d", got, n-1)
	}
}

// A sink whose digest belongs to one route delivers its other rows (of
// another route, or enqueued directly) one by one, as a sink without a
// digest does, beside the digested route's digest.
// (Mutation: the digest loop keying every row by a digest policy, nil for
// the undigested ones, panics the claim loop and stops the relay.)
func TestRowsOfAnUndigestedRouteGoOutAlone(t *testing.T) {
	b := coretest.Setup(t)
	ids := b.EnqueueN(t, "dg", 6, nil)
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET route = 'alerts' WHERE id = ANY($1)", ids[:4]); err != nil {
		t.Fatal(err)
	}
	fake := &digestSink{refuse: func(*sink.Delivery) error { return nil }}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "dg", Sink: fake, RouteDigests: map[string]*sink.DigestPolicy{"alerts": {MaxMessages: 50}}}}})
	signals.WaitWritten(t, 20*time.Second, "dg", "sent", 6)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var digested []string
	for _, keys := range fake.accepted {
		digested = append(digested, keys...)
	}
	slices.Sort(digested)
	slices.Sort(fake.alone)
	if !slices.Equal(digested, []string{"k-0", "k-1", "k-2", "k-3"}) || !slices.Equal(fake.alone, []string{"k-4", "k-5"}) {
		t.Fatalf("digested %v and alone %v; want the alerts route's four rows digested and the other two alone", digested, fake.alone)
	}
}
