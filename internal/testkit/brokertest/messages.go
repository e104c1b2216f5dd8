package brokertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// MetadataHeader is a header every test message carries, to check that the
// row's own headers reach the broker next to the trace context.
const MetadataHeader = "x-tenant"

// Payload is the JSON of a test message: its place in the sequence of its
// ordering key, for order checks.
type Payload struct {
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

// Messages returns n messages for sink with dedup keys "<prefix>-0000"...
// When orderingKeys are given, message i gets orderingKeys[i%len] and is
// the i/len-th of that key, so the keys interleave.
func Messages(sink, prefix string, n int, orderingKeys ...string) []outboxd.Message {
	msgs := make([]outboxd.Message, n)
	for i := range msgs {
		p := Payload{Seq: i}
		if len(orderingKeys) > 0 {
			p.Key, p.Seq = orderingKeys[i%len(orderingKeys)], i/len(orderingKeys)
		}
		body, _ := json.Marshal(p)
		msgs[i] = outboxd.Message{
			Sink: sink, DedupKey: fmt.Sprintf("%s-%04d", prefix, i), Payload: json.RawMessage(body),
			OrderingKey: p.Key, Headers: map[string]string{MetadataHeader: "acme"},
		}
	}
	return msgs
}

// RelayLease is the lease of test relays: short, so a relay that takes
// over from a killed one does not wait long.
const RelayLease = 3 * time.Second

// relayPoolSize keeps each relay's pool small: the database is shared by
// every test package.
const relayPoolSize = 4

// Relay runs a relay delivering ob's rows through sink until the test ends
// and returns its test signals. Retries come quickly (backoff from 100 ms
// to 1 s) and many (50), so an outage of a few seconds stays well inside
// the retry budget.
func Relay(t testing.TB, pool *pgxpool.Pool, ob *testdb.Outbox, tracing *Tracing, sink relay.SinkConfig) *relaysignal.Relay {
	t.Helper()
	if sink.MaxAttempts == 0 {
		sink.MaxAttempts = 50
	}
	if sink.Backoff == (relay.Backoff{}) {
		sink.Backoff = relay.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	}
	cfg := relay.Config{Sinks: []relay.SinkConfig{sink}, Lease: RelayLease, PollInterval: 50 * time.Millisecond}
	if tracing != nil {
		cfg.TracerProvider = tracing.Provider
	}
	return testrelay.Run(t, pool, ob.Schema(), cfg)
}

// WaitSent waits until the relay signalled n of sink's rows sent, failing
// on a dead row.
func WaitSent(t testing.TB, signals *relaysignal.Relay, pool *pgxpool.Pool, ob *testdb.Outbox, sink string, n int, timeout time.Duration) {
	t.Helper()
	signals.Written.Wait(t, timeout, fmt.Sprintf("%d rows of %s sent", n, sink), func(all []relaysignal.Outcome) bool {
		if dead := relaysignal.CountWrittenTo(all, sink, string(status.Dead)); dead > 0 {
			t.Fatalf("%d rows of %s are dead: %v", dead, sink, lastErrors(t, pool, ob))
		}
		return relaysignal.CountWrittenTo(all, sink, string(status.Sent)) >= n
	})
}

// lastErrors returns the distinct last_error values of ob's rows.
func lastErrors(t testing.TB, pool *pgxpool.Pool, ob *testdb.Outbox) []string {
	rows, err := pool.Query(context.Background(),
		"SELECT DISTINCT last_error FROM "+ob.Schema()+".messages WHERE last_error IS NOT NULL LIMIT 10")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// WaitFailedAttempt waits until the relay records an attempt that did not
// deliver after the call: it tried the broker and found it away. Such an
// attempt is written failed, or pending when the relay gave it back (held
// for the breaker's probe, or past its delivery deadline): in a CI
// rehearsal on a loaded machine, an outage's first outcomes were all
// pending, and waiting for a failed one timed out.
// A dead row fails the test at once: an outage must not dead-letter
// anything.
func WaitFailedAttempt(t testing.TB, signals *relaysignal.Relay, timeout time.Duration) {
	t.Helper()
	undelivered := func(all []relaysignal.Outcome) int {
		return relaysignal.CountWritten(all, string(status.Failed)) + relaysignal.CountWritten(all, string(status.Pending))
	}
	before := undelivered(signals.Written.All())
	signals.Written.Wait(t, timeout, "an attempt that did not deliver recorded", func(all []relaysignal.Outcome) bool {
		if dead := relaysignal.CountWritten(all, string(status.Dead)); dead > 0 {
			t.Fatalf("%d rows dead-lettered by the outage", dead)
		}
		return undelivered(all) > before
	})
}

// Received is one message as a consumer read it from a broker.
type Received struct {
	ID      string            // the broker's message id: Nats-Msg-Id, message-id, the delivery id header
	Dest    string            // where it was read: subject, queue, topic/partition
	Payload []byte            // the body
	Headers map[string]string // the broker message's headers
	Key     string            // the record key (Kafka)
}

// CheckDelivered checks that every message of want was received, each copy
// under its delivery id ("<sink>/<dedup key>", sink.Delivery.DeliveryID)
// with the enqueued payload and the row's metadata
// header, and nothing else; with exactlyOnce, once. It returns the number
// of extra copies.
func CheckDelivered(t testing.TB, want []outboxd.Message, got []Received, exactlyOnce bool) (duplicates int) {
	t.Helper()
	byID := map[string][]Received{}
	for _, r := range got {
		byID[r.ID] = append(byID[r.ID], r)
	}
	for _, m := range want {
		id := (&sink.Delivery{Sink: m.Sink, DedupKey: m.DedupKey}).DeliveryID()
		copies := byID[id]
		delete(byID, id)
		switch {
		case len(copies) == 0:
			t.Errorf("%s: never received", m.DedupKey)
		case exactlyOnce && len(copies) > 1:
			t.Errorf("%s: received %d times, want exactly once", m.DedupKey, len(copies))
		}
		duplicates += max(0, len(copies)-1)
		for _, c := range copies {
			if !jsonEqual(c.Payload, m.Payload.(json.RawMessage)) {
				t.Errorf("%s: payload %s, want %s", m.DedupKey, c.Payload, m.Payload)
			}
			if c.Headers[MetadataHeader] != m.Headers[MetadataHeader] {
				t.Errorf("%s: header %s = %q, want %q", m.DedupKey, MetadataHeader, c.Headers[MetadataHeader], m.Headers[MetadataHeader])
			}
		}
	}
	for id := range byID {
		t.Errorf("received %q, which was never enqueued", id)
	}
	return duplicates
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// CheckOrder checks that, at each destination, every ordering key's
// messages arrived in sequence (a redelivered copy may repeat one already
// seen, never go back further), and that each key used one destination.
func CheckOrder(t testing.TB, got []Received) {
	t.Helper()
	type keyState struct {
		dest string
		seqs []int
	}
	keys := map[string]*keyState{}
	for _, r := range got {
		var p Payload
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatalf("payload %s: %v", r.Payload, err)
		}
		k := keys[p.Key]
		if k == nil {
			k = &keyState{dest: r.Dest}
			keys[p.Key] = k
		}
		if r.Dest != k.dest {
			t.Errorf("ordering key %q reached %s and %s", p.Key, k.dest, r.Dest)
		}
		k.seqs = append(k.seqs, p.Seq)
	}
	for key, k := range keys {
		if !slices.IsSorted(k.seqs) {
			t.Errorf("ordering key %q arrived out of order at %s: %v", key, k.dest, k.seqs)
		}
	}
}
