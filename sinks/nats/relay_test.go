package nats_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// TestRelayPublishesToJetStream enqueues traced messages into the real
// outbox, relays them through the nats sink and reads the stream: each
// message is there once, on the subject its template gives, under
// Nats-Msg-Id = its dedup key, with the enqueued payload, the row's own
// header and a traceparent whose parent is the relay's delivery span in
// the producer's trace.
func TestRelayPublishesToJetStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	tg := target(url, st.name+".{{.Sink}}", &st)
	tg.Check = func(t testing.TB, r brokertest.Received) {
		if r.Dest != st.name+".events" {
			t.Errorf("%s: subject %s, want %s.events", r.ID, r.Dest, st.name)
		}
	}
	brokertest.EndToEnd(t, tg, "events")
}

// TestOrderingKeyArrivesInOrderOnItsSubject publishes messages of
// interleaved ordering keys on a subject per key; each subject holds its
// key's messages in order.
func TestOrderingKeyArrivesInOrderOnItsSubject(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	brokertest.Ordered(t, target(url, st.name+".{{.OrderingKey}}", &st), "orders")
}
