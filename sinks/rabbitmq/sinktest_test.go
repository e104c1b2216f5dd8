package rabbitmq_test

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// The rabbitmq sink keeps the sink contract (package sinktest) against
// the machine's RabbitMQ: a queue of the test's own, a missing exchange,
// a full queue that rejects publishes, a connection through a proxy that
// stops forwarding, and a port nothing listens on.
func TestRabbitMQKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	closed := brokerURL("127.0.0.1:" + strconvItoa(proc.FreePort(t)))
	to := func(t testing.TB, url, exchange string) sink.Sink {
		// An unroutable ordering key spoils a delivery.
		return brokertest.Target{Type: rabbitmq.Type.Name, Options: map[string]any{
			"url": url, "exchange": exchange, "routing_key": `{{or .OrderingKey "events.x"}}`, "connect_timeout": "1s",
		}}.Build(t, sinktest.SinkName)
	}
	// Beside q, bound to q's exchange for routing key full.x, a queue of
	// one message that refuses more, holding one: the broker nacks the
	// next publish.
	full := q.queue + "-full"
	if _, err := q.ch.QueueDeclare(full, false, false, false, false,
		amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = q.ch.QueueDelete(full, false, false, false) })
	if err := q.ch.QueueBind(full, "full.x", q.exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	toFull := func(d *sink.Delivery) { d.OrderingKey = "full.x" }
	first := &sink.Delivery{Sink: sinktest.SinkName, DedupKey: "fills-the-queue", Payload: []byte(`{}`)}
	toFull(first)
	if err := to(t, brokerURL(addr), q.exchange).Deliver(t.Context(), first); err != nil {
		t.Fatalf("the one message the full queue holds: %v", err)
	}
	at := func(url, exchange string) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, url, exchange)} }
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, brokerURL(addr), q.exchange) },
		Received: func(t testing.TB) []string {
			var ids []string
			for _, m := range q.messages(t) {
				ids = append(ids, m.ID)
			}
			return ids
		},
		Retryable: at(closed, q.exchange),
		Permanent: at(brokerURL(addr), q.exchange+"-missing"),
		RetryAfter: func(testing.TB) sinktest.Case {
			return sinktest.Case{Alter: toFull, Delay: rabbitmq.DefaultRefusedPause}
		},
		Hang: func(t testing.TB) sinktest.Case {
			// Connected (Check opens the channel, publishing nothing),
			// then the broker stops answering.
			proxy := brokertest.NewProxy(t, addr)
			s := to(t, brokerURL(proxy.Addr()), q.exchange)
			if err := s.(sink.Checker).Check(context.Background()); err != nil {
				t.Fatalf("connect through the proxy: %v", err)
			}
			proxy.Stall()
			// Cut before the sink closes, which would wait for the
			// broker's answer.
			t.Cleanup(proxy.Down)
			return sinktest.Case{Sink: s}
		},
		Spoil:       func(d *sink.Delivery) { d.OrderingKey = "nobody.listens" },
		Unreachable: func(t testing.TB) sink.Sink { return to(t, closed, q.exchange) },
	})
}
