package rabbitmq_test

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// The binary registers the sink types in sinks/builtin. These tests build sinks
// through the registry, as plugins.yaml does, in this process and in the
// crash tests' children, so they register this one.
func init() { registry.Register(rabbitmq.Type) }

// brokerURL returns the URL of a broker at addr with the machine's
// guest/guest account.
func brokerURL(addr string) string { return "amqp://guest:guest@" + addr + "/" }

// requireBroker returns the machine's RabbitMQ address, failing in CI and
// skipping elsewhere when it is down.
func requireBroker(t *testing.T) string {
	t.Helper()
	addr := brokertest.RabbitMQAddr()
	brokertest.Require(t, "RabbitMQ", addr, "rabbitmq-server -detached")
	return addr
}

// testQueue is an exchange and a queue of a test's own, bound with
// routing key "#" on a topic exchange so every message reaches the queue;
// both are deleted when the test ends.
type testQueue struct {
	exchange, queue string
	ch              *amqp.Channel
	taken           []brokertest.Received // every message taken from the queue so far
}

func newQueue(t *testing.T, addr string) *testQueue {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(addr))
	if err != nil {
		t.Fatalf("connect to RabbitMQ at %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := "outboxd-test-" + strings.ToLower(rand.Text()[:10])
	q := &testQueue{exchange: name, queue: name, ch: ch}
	if err := ch.ExchangeDeclare(name, amqp.ExchangeTopic, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(name, "events.#", name, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
	})
	return q
}

// messages takes the queue's messages and returns every message taken so
// far, in queue order: reading a queue consumes it.
func (q *testQueue) messages(t testing.TB) []brokertest.Received {
	t.Helper()
	for {
		m, ok, err := q.ch.Get(q.queue, true)
		if err != nil {
			t.Fatalf("get from %s: %v", q.queue, err)
		}
		if !ok {
			return q.taken
		}
		headers := map[string]string{}
		for k, v := range m.Headers {
			headers[k] = fmt.Sprint(v)
		}
		if m.DeliveryMode != amqp.Persistent {
			t.Errorf("%s: delivery mode %d, want persistent", m.MessageId, m.DeliveryMode)
		}
		q.taken = append(q.taken, brokertest.Received{ID: m.MessageId, Dest: m.RoutingKey, Payload: m.Body, Headers: headers})
	}
}

// target is the rabbitmq sink publishing through the broker at addr to
// q's exchange with routing key "events.<sink name>".
func target(addr string, q *testQueue) brokertest.Target {
	return brokertest.Target{
		Type:    rabbitmq.Type.Name,
		Options: map[string]any{"url": brokerURL(addr), "exchange": q.exchange, "routing_key": "events.{{.Sink}}"},
		Read:    q.messages,
	}
}

// build makes a rabbitmq sink through the registry, closed when the test
// ends.
func build(t *testing.T, name string, options map[string]any) sink.Sink {
	t.Helper()
	return brokertest.Target{Type: rabbitmq.Type.Name, Options: options}.Build(t, name)
}
