package brokertest

import (
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/registry"
)

// The bounds of the shared scenarios' waits.
const (
	// DeliverTimeout bounds the wait for a scenario's messages to be sent.
	DeliverTimeout = time.Minute
	// OutageWait bounds the wait for the relay to notice a broker is away.
	OutageWait = 30 * time.Second
)

// crashMessages and crashAfter size the crash scenario: the child relay
// dies after crashAfter acknowledged publishes of crashMessages.
const (
	crashMessages = 300
	crashAfter    = 100
)

// Target is a broker sink under test, as the shared scenarios drive it.
type Target struct {
	Type    string                         // the sink type
	Options map[string]any                 // its options
	Read    func(t testing.TB) []Received  // everything the broker holds for the test, in order
	Once    bool                           // the broker keeps each message once even after a redelivery
	Check   func(t testing.TB, r Received) // extra checks of each message, or nil
}

// Build makes a sink of the target's type through the registry, closed
// when the test ends.
func (tg Target) Build(t testing.TB, name string) sink.Sink {
	t.Helper()
	s, err := registry.Build(tg.Type, name, tg.Options, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return s
}

// EndToEnd enqueues traced messages into the real outbox, relays them
// through the target's sink and reads the broker: each message is there
// once under its dedup key, with the enqueued payload, the row's own
// header and a traceparent whose parent is the relay's delivery span in
// the producer's trace. It returns what the broker holds.
func EndToEnd(t *testing.T, tg Target, sink string) []Received {
	t.Helper()
	pool, ob := testdb.New(t)
	tracing := NewTracing(t)
	signals := Relay(t, pool, ob, tracing, relay.SinkConfig{Name: sink, Type: tg.Type, Sink: tg.Build(t, sink)})
	msgs := Messages(sink, "e2e", 30)
	producer := tracing.Enqueue(t, pool, ob, msgs)
	WaitSent(t, signals, pool, ob, sink, len(msgs), DeliverTimeout)
	got := tg.Read(t)
	CheckDelivered(t, msgs, got, true)
	for _, r := range got {
		tracing.CheckTraceContext(t, sink, producer, r)
		if tg.Check != nil {
			tg.Check(t, r)
		}
	}
	return got
}

// Ordered relays messages of interleaved ordering keys through the
// target's sink and checks that each key's messages reached one
// destination, in order. It returns what the broker holds.
func Ordered(t *testing.T, tg Target, sink string) []Received {
	t.Helper()
	pool, ob := testdb.New(t)
	signals := Relay(t, pool, ob, nil, relay.SinkConfig{Name: sink, Sink: tg.Build(t, sink)})
	msgs := Messages(sink, "ord", 80, "customer-a", "customer-b", "customer-c", "customer-d")
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	WaitSent(t, signals, pool, ob, sink, len(msgs), DeliverTimeout)
	got := tg.Read(t)
	CheckDelivered(t, msgs, got, true)
	CheckOrder(t, got)
	return got
}

// CrashMidPublish kills a relay (in a child process running childTest,
// see CrashChild) right after it published a third of a backlog, then lets
// a second relay take the abandoned rows over. Every message must reach
// the broker, each copy under its dedup key; with Once, exactly once. It
// returns the outbox (and a pool on its database) and the number of extra
// copies.
func CrashMidPublish(t *testing.T, tg Target, sink, childTest string) (*pgxpool.Pool, *testdb.Outbox, int) {
	t.Helper()
	pool, ob := testdb.New(t)
	msgs := Messages(sink, "crash", crashMessages)
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	Crash(t, ob, tg.Type, sink, tg.Options, crashAfter, childTest)
	if held := len(tg.Read(t)); held < crashAfter {
		t.Fatalf("the broker holds %d messages after the crash, want at least the %d acknowledged", held, crashAfter)
	}
	// The rows the child recorded before it died are sent; the new relay
	// signals the rest.
	recorded := testdb.StatusCounts(t, pool, ob, sink)[string(status.Sent)]
	signals := Relay(t, pool, ob, nil, relay.SinkConfig{Name: sink, Sink: tg.Build(t, sink)})
	WaitSent(t, signals, pool, ob, sink, len(msgs)-recorded, DeliverTimeout)
	got := tg.Read(t)
	duplicates := CheckDelivered(t, msgs, got, tg.Once)
	if tg.Check != nil {
		for _, r := range got {
			tg.Check(t, r)
		}
	}
	return pool, ob, duplicates
}

// Outage starts a relay while the broker is away (down has been called),
// brings it up, takes it down mid-run and up again: messages wait in the
// outbox each time, are all delivered once the broker is back (with Once,
// exactly once), and none is dead-lettered.
func Outage(t *testing.T, tg Target, sink string, down, up func()) {
	t.Helper()
	pool, ob := testdb.New(t)
	signals := Relay(t, pool, ob, nil, relay.SinkConfig{Name: sink, Sink: tg.Build(t, sink)})
	var all []outboxd.Message
	for phase, prefix := range []string{"before", "during"} {
		if phase > 0 {
			down()
		}
		msgs := Messages(sink, prefix, 20)
		all = append(all, msgs...)
		if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
			t.Fatal(err)
		}
		WaitFailedAttempt(t, signals, OutageWait)
		up()
		WaitSent(t, signals, pool, ob, sink, len(all), DeliverTimeout)
	}
	CheckDelivered(t, all, tg.Read(t), tg.Once)
	if dead := testdb.StatusCounts(t, pool, ob, sink)[string(status.Dead)]; dead > 0 {
		t.Errorf("%d messages dead-lettered by a short outage", dead)
	}
}
