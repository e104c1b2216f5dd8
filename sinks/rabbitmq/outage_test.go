package rabbitmq_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
)

// outageWait bounds the wait for the relay to notice the broker is away.
const outageWait = 30 * time.Second

// A broker that is unreachable when the relay starts, and again mid-run
// (a proxy in front of it refuses and cuts connections), only delays
// delivery: messages wait in the outbox, reach the queue once it is back,
// and none is dead-lettered.
func TestBrokerDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	proxy := brokertest.NewProxy(t, addr)
	proxy.Down()
	pool, ob := testdb.New(t)
	sink := build(t, "orders", map[string]any{
		"url": brokerURL(proxy.Addr()), "exchange": q.exchange, "routing_key": "events.x", "connect_timeout": "1s",
	})
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "orders", Sink: sink})

	first := brokertest.Messages("orders", "before", 20)
	if _, err := ob.EnqueueBatch(t.Context(), pool, first); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFailedAttempt(t, pool, ob, outageWait)
	proxy.Up()
	brokertest.WaitSent(t, pool, ob, "orders", int64(len(first)), deliverTimeout)

	proxy.Down()
	second := brokertest.Messages("orders", "during", 20)
	if _, err := ob.EnqueueBatch(t.Context(), pool, second); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFailedAttempt(t, pool, ob, outageWait)
	proxy.Up()
	brokertest.WaitSent(t, pool, ob, "orders", int64(len(first)+len(second)), deliverTimeout)

	brokertest.CheckDelivered(t, append(first, second...), q.messages(t), false)
	if dead := testdb.StatusCounts(t, pool, ob, "orders")["dead"]; dead > 0 {
		t.Errorf("%d messages dead-lettered by a short outage", dead)
	}
}
