package pubsub_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/outboxd/outboxd/core/sink"
	pubsubsink "github.com/outboxd/outboxd/sinks/pubsub"
)

// TestPublishesInOrderPerOrderingKey publishes interleaved messages of
// three ordering keys and receives them from an ordered subscription:
// each carries its key, its delivery id attribute and the row's header,
// and each key's messages arrive in the order they were delivered.
// Mutation: leaving OrderingKey off the message fails it (no key).
func TestPublishesInOrderPerOrderingKey(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	sub := f.topic(t, "orders")
	s := build(t, "s", f.options(sub.topic))
	keys := []string{"customer-a", "customer-b", "customer-c"}
	const perKey = 10
	for i := range perKey * len(keys) {
		d := delivery("m"+strconv.Itoa(i), i)
		d.OrderingKey = keys[i%len(keys)]
		d.Headers["x-tenant"] = "acme"
		if err := s.Deliver(t.Context(), d); err != nil {
			t.Fatalf("deliver %d: %v", i, err)
		}
		var r pubsubsink.Receipt
		if err := json.Unmarshal(d.Receipt(), &r); err != nil || r.Topic != "orders" || r.MessageID == "" {
			t.Fatalf("receipt of %d: %+v, %v", i, r, err)
		}
	}
	got := sub.read(t)
	if len(got) != perKey*len(keys) {
		t.Fatalf("received %d messages, want %d", len(got), perKey*len(keys))
	}
	last := map[string]int{}
	for _, r := range got {
		n, err := strconv.Atoi(strings.TrimPrefix(r.ID, "s/m"))
		if err != nil {
			t.Fatalf("attribute %s = %q, want the delivery id s/m<n>", pubsubsink.DeliveryIDAttribute, r.ID)
		}
		if want := keys[n%len(keys)]; r.Key != want {
			t.Errorf("message %d: ordering key %q, want %q", n, r.Key, want)
		}
		if prev, ok := last[r.Key]; ok && n < prev {
			t.Errorf("ordering key %q: message %d arrived after %d", r.Key, n, prev)
		}
		last[r.Key] = n
		if r.Headers["x-tenant"] != "acme" {
			t.Errorf("message %d: attributes %v lack the row's header x-tenant", n, r.Headers)
		}
		if want := `{"n":` + strconv.Itoa(n) + `}`; string(r.Payload) != want {
			t.Errorf("message %d: data %s, want %s", n, r.Payload, want)
		}
	}
}

// TestMissingTopicIsPermanent publishes to a topic the project lacks:
// Pub/Sub answers NOT_FOUND, a permanent failure that names the topic.
// Mutation: dropping codes.NotFound from classify fails it (retryable).
func TestMissingTopicIsPermanent(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	err := build(t, "s", f.options("no-such-topic")).Deliver(t.Context(), delivery("k", 1))
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "no-such-topic") {
		t.Fatalf("Deliver = %v, want a permanent error naming the topic", err)
	}
}

// TestBadInputIsRefusedBeforePublishing delivers rows Pub/Sub would refuse
// (a reserved attribute name, an attribute value past 1024 bytes, an
// ordering key past 1024 bytes, a message past 10 MB, which the client
// library refuses): each fails permanently with what is wrong, and nothing
// reaches the topic.
// Mutation: removing the reserved-prefix case from message fails it.
func TestBadInputIsRefusedBeforePublishing(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	sub := f.topic(t, "orders")
	s := build(t, "s", f.options(sub.topic))
	long := strings.Repeat("x", 1025)
	for _, tc := range []struct {
		name  string
		spoil func(*sink.Delivery)
		want  string
	}{
		{"reserved attribute", func(d *sink.Delivery) { d.Headers["goog-x"] = "1" }, `reserves attribute names starting with "goog"`},
		{"long attribute value", func(d *sink.Delivery) { d.Headers["x"] = long }, "a value of 1025 bytes"},
		{"long ordering key", func(d *sink.Delivery) { d.OrderingKey = long }, "ordering key of 1025 bytes"},
		{"message over 10 MB", func(d *sink.Delivery) {
			d.Payload = json.RawMessage(`"` + strings.Repeat("x", 10_000_001) + `"`)
		}, "size exceeds"},
	} {
		d := delivery("k", 1)
		tc.spoil(d)
		if err := s.Deliver(t.Context(), d); !sink.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Deliver = %v, want a permanent error saying %q", tc.name, err, tc.want)
		}
	}
	if got := sub.read(t); len(got) != 0 {
		t.Errorf("the topic received %d messages, want none", len(got))
	}
}

// TestFailedKeyIsResumed makes the fake refuse the first publish
// (UNAVAILABLE): that delivery fails retryably, and the next delivery of
// the same ordering key is published, because the sink resumed the key the
// failure paused.
// Mutation: removing the ResumePublish call fails it (the retry gets
// "publishing paused").
func TestFailedKeyIsResumed(t *testing.T) {
	t.Parallel()
	f := newFake(t, failFirst(codes.Unavailable))
	sub := f.topic(t, "orders")
	s := build(t, "s", f.options(sub.topic))
	first := delivery("k1", 1)
	first.OrderingKey = "customer-a"
	if err := s.Deliver(t.Context(), first); err == nil || sink.IsPermanent(err) {
		t.Fatalf("first Deliver = %v, want a retryable error", err)
	}
	if err := s.Deliver(t.Context(), first); err != nil {
		t.Fatalf("retry of the key: %v", err)
	}
	if got := sub.read(t); len(got) != 1 || got[0].ID != "s/k1" {
		t.Fatalf("received %+v, want the one retried message", got)
	}
}

// TestQuotaExhaustedPauses makes the fake answer RESOURCE_EXHAUSTED: the
// sink asks the relay to pause for DefaultQuotaPause.
// Mutation: mapping ResourceExhausted to a plain retryable error fails it.
func TestQuotaExhaustedPauses(t *testing.T) {
	t.Parallel()
	f := newFake(t, pstest.WithErrorInjection("Publish", codes.ResourceExhausted, "quota exceeded"))
	sub := f.topic(t, "orders")
	err := build(t, "s", f.options(sub.topic)).Deliver(t.Context(), delivery("k", 1))
	if d, ok := sink.RetryAfterDelay(err); !ok || d != pubsubsink.DefaultQuotaPause {
		t.Fatalf("Deliver = %v, want a pause of %s", err, pubsubsink.DefaultQuotaPause)
	}
}

// failFirst is a reactor making the fake answer the first publish with
// code, and every later one as usual.
func failFirst(code codes.Code) pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: "Publish", Reactor: &onceReactor{code: code}}
}

type onceReactor struct {
	code codes.Code
	done bool
}

// React refuses the first request; the fake calls it under its lock.
func (r *onceReactor) React(any) (bool, any, error) {
	if r.done {
		return false, nil, nil
	}
	r.done = true
	return true, nil, status.Error(r.code, "injected by the test")
}
