package mqtt_test

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/registry"
	mqttsink "github.com/outboxd/outboxd/sinks/mqtt"
)

// The binary registers the sink types in sinks/builtin. These tests build
// sinks through the registry, as plugins.yaml does, so they register this
// one.
func init() { registry.Register(mqttsink.Type) }

// Where the machine's Mosquitto listens, overridable for other setups.
const (
	mqttAddrEnv     = "TEST_MQTT_ADDR"
	defaultMQTTAddr = "127.0.0.1:1883"
)

// arrival bounds the wait for a published message to reach the test's
// subscriber, generous for a loaded machine.
const arrival = 30 * time.Second

// brokerAddr returns the machine's Mosquitto, failing in CI and skipping
// elsewhere when it is down.
func brokerAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(mqttAddrEnv)
	if addr == "" {
		addr = defaultMQTTAddr
	}
	brokertest.Require(t, "Mosquitto", addr, "mosquitto -d -p 1883")
	return addr
}

// subscriber is the test's own MQTT client subscribed with QoS 1 to
// every topic under a unique prefix, keeping what arrives.
type subscriber struct {
	prefix string // "outboxd-test/<random>/"
	client paho.Client

	mu   sync.Mutex
	got  []brokertest.Received
	qos  []byte
	seen map[string]bool // markers that arrived
}

// subscribe connects a subscriber to the broker at addr, disconnected when
// the test ends.
func subscribe(t testing.TB, addr string) *subscriber {
	t.Helper()
	sub := &subscriber{prefix: "outboxd-test/" + rand.Text()[:10] + "/", seen: map[string]bool{}}
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("outboxd-test-" + rand.Text()[:10]).
		SetCleanSession(true).SetOrderMatters(true)
	sub.client = paho.NewClient(opts)
	if tok := sub.client.Connect(); !tok.WaitTimeout(arrival) || tok.Error() != nil {
		t.Fatalf("connect the test's subscriber: %v", tok.Error())
	}
	t.Cleanup(func() { sub.client.Disconnect(0) })
	tok := sub.client.Subscribe(sub.prefix+"#", 1, func(_ paho.Client, m paho.Message) { sub.keep(t, m) })
	if !tok.WaitTimeout(arrival) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return sub
}

// keep records one message: a marker by its id, anything else but an
// empty message as the envelope it must be.
func (sub *subscriber) keep(t testing.TB, m paho.Message) {
	if len(m.Payload()) == 0 {
		return // a test clearing a retained message
	}
	var env mqttsink.Envelope
	if err := json.Unmarshal(m.Payload(), &env); err != nil {
		t.Errorf("message on %s is not an envelope: %s", m.Topic(), m.Payload())
		return
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if env.ID == "" {
		var marker struct{ Marker string }
		_ = json.Unmarshal(env.Payload, &marker)
		sub.seen[marker.Marker] = true
		return
	}
	sub.got = append(sub.got, brokertest.Received{ID: env.ID, Dest: m.Topic()[len(sub.prefix):], Payload: env.Payload, Headers: env.Headers})
	sub.qos = append(sub.qos, m.Qos())
}

// read returns what arrived so far, after a marker the test publishes on
// topic (under the prefix) has arrived too: the broker forwards one
// topic's messages in order, so every message it acknowledged before has
// arrived as well.
func (sub *subscriber) read(t testing.TB, topic string) []brokertest.Received {
	t.Helper()
	marker := rand.Text()
	body, _ := json.Marshal(mqttsink.Envelope{Payload: json.RawMessage(`{"Marker":"` + marker + `"}`)})
	if tok := sub.client.Publish(sub.prefix+topic, 1, false, body); !tok.WaitTimeout(arrival) || tok.Error() != nil {
		t.Fatalf("publish the marker: %v", tok.Error())
	}
	testrelay.WaitFor(t, arrival, "the marker to arrive", func() bool {
		sub.mu.Lock()
		defer sub.mu.Unlock()
		return sub.seen[marker]
	})
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return slices.Clone(sub.got)
}

// ids returns the delivery ids that arrived so far, after a marker on topic.
func (sub *subscriber) ids(t testing.TB, topic string) []string {
	var ids []string
	for _, r := range sub.read(t, topic) {
		ids = append(ids, r.ID)
	}
	return ids
}

// options are the mqtt sink's options publishing under the subscriber's
// prefix on topic (a template).
func (sub *subscriber) options(url, topic string) map[string]any {
	return map[string]any{"url": url, "topic": sub.prefix + topic}
}

// target is the mqtt sink publishing on the topic template, read after a
// marker on each of the topics named (the ones the template gives).
func (sub *subscriber) target(url, template string, topics ...string) brokertest.Target {
	return brokertest.Target{
		Type: mqttsink.Type.Name, Options: sub.options(url, template),
		Read: func(t testing.TB) []brokertest.Received {
			for _, topic := range topics[1:] {
				sub.read(t, topic)
			}
			return sub.read(t, topics[0])
		},
	}
}

// build makes an mqtt sink through the registry, closed when the test ends.
func build(t testing.TB, name string, options map[string]any) sink.Sink {
	t.Helper()
	return brokertest.Target{Type: mqttsink.Type.Name, Options: options}.Build(t, name)
}

// closedURL is a broker URL of a port nothing listens on.
func closedURL(t testing.TB) string {
	return "tcp://127.0.0.1:" + strconv.Itoa(proc.FreePort(t))
}

// delivery is a delivery of sink "s" with the payload {"n": n}.
func delivery(key string, n int) *sink.Delivery {
	return &sink.Delivery{Sink: "s", DedupKey: key, Payload: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), Headers: map[string]string{}}
}
