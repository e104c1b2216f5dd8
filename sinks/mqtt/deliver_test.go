package mqtt_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	mqttsink "github.com/outboxd/outboxd/sinks/mqtt"
)

// A message arrives with QoS 1 on the topic its template gives, in the
// envelope: its delivery id, the row's headers, the payload; the receipt
// names the topic.
// Mutation: publishing with qos 0 whatever the option says fails it (the
// subscriber gets QoS 0).
func TestMessageArrivesWithQoS1InItsEnvelope(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	s := build(t, "s", sub.options("tcp://"+addr, "orders/{{.OrderingKey}}"))
	d := delivery("k1", 1)
	d.OrderingKey, d.Headers["x-tenant"] = "acme", "t1"
	if err := s.Deliver(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	got := sub.read(t, "orders/acme")
	if len(got) != 1 || got[0].ID != "s/k1" || got[0].Dest != "orders/acme" || string(got[0].Payload) != `{"n":1}` || got[0].Headers["x-tenant"] != "t1" {
		t.Fatalf("received %+v, want s/k1 on orders/acme with its payload and header", got)
	}
	if sub.qos[0] != 1 {
		t.Errorf("received with QoS %d, want 1", sub.qos[0])
	}
	var r mqttsink.Receipt
	if err := json.Unmarshal(d.Receipt(), &r); err != nil || r.Topic != sub.prefix+"orders/acme" {
		t.Errorf("receipt %s (%v), want the topic", d.Receipt(), err)
	}
}

// retain: true makes the broker keep the topic's last message for a
// subscriber that comes later.
// Mutation: passing false as Publish's retained flag fails it.
func TestRetainKeepsTheLastMessageForLaterSubscribers(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	o := sub.options("tcp://"+addr, "retained")
	o["retain"] = true
	if err := build(t, "s", o).Deliver(t.Context(), delivery("r1", 1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // an empty retained message clears the topic
		sub.client.Publish(sub.prefix+"retained", 1, true, []byte{}).WaitTimeout(arrival)
	})
	late := subscribe(t, addr)
	arrived := make(chan string, 1)
	late.client.Subscribe(sub.prefix+"retained", 1, func(_ paho.Client, m paho.Message) {
		var env mqttsink.Envelope
		if json.Unmarshal(m.Payload(), &env) == nil && m.Retained() {
			select {
			case arrived <- env.ID:
			default:
			}
		}
	}).WaitTimeout(arrival)
	select {
	case id := <-arrived:
		if id != "s/r1" {
			t.Errorf("retained message %s, want s/r1", id)
		}
	case <-time.After(arrival):
		t.Fatal("a later subscriber got no retained message")
	}
}

// A publish counts as delivered only when the broker's PUBACK arrives:
// with the broker stalled behind a proxy, Deliver fails at its deadline,
// retryably. When the connection is cut the sink dials again once the
// broker is back.
// Mutation: returning without waiting for the publish token makes the
// stalled delivery succeed; an IsClosed that always says false never
// recovers after the cut.
func TestDeliveredOnlyAtPubackAndReconnects(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	proxy := brokertest.NewProxy(t, addr)
	o := sub.options("tcp://"+proxy.Addr(), "events")
	o["connect_timeout"], o["timeout"] = "2s", "2s"
	s := build(t, "s", o)
	if err := s.Deliver(t.Context(), delivery("before", 1)); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	proxy.Stall()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := s.Deliver(ctx, delivery("stalled", 2)); err == nil || sink.IsPermanent(err) {
		t.Fatalf("a publish without its PUBACK: %v, want a retryable error", err)
	}
	proxy.Down()
	proxy.Up()
	testrelay.WaitFor(t, brokertest.OutageWait, "a delivery after the broker came back", func() bool {
		return s.Deliver(t.Context(), delivery("after", 3)) == nil
	})
	ids := sub.ids(t, "events")
	if !slices.Contains(ids, "s/before") || !slices.Contains(ids, "s/after") {
		t.Errorf("received %v, want s/before and s/after", ids)
	}
}

// A message whose topic MQTT does not allow a publish on, or whose payload
// is not JSON, fails permanently without reaching the broker.
// Mutation: dropping the wildcard check from checkTopic lets the broker
// drop the connection instead, retryably.
func TestUnpublishableMessageIsPermanent(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	s := build(t, "s", map[string]any{"url": "tcp://" + addr, "topic": "{{.Headers.topic}}"})
	for name, topic := range map[string]string{
		"empty": "", "plus": sub.prefix + "a/+/b", "hash": sub.prefix + "#", "nul": sub.prefix + "a\x00", "dollar": "$SYS/x",
	} {
		d := delivery("bad-"+name, 1)
		d.Headers["topic"] = topic
		if err := s.Deliver(t.Context(), d); err == nil || !sink.IsPermanent(err) {
			t.Errorf("topic %q: %v, want a permanent error", topic, err)
		}
	}
	missing := delivery("no-header", 1)
	if err := s.Deliver(t.Context(), missing); err == nil || !sink.IsPermanent(err) {
		t.Errorf("a topic header the message lacks: %v, want a permanent error", err)
	}
	notJSON := delivery("not-json", 1)
	notJSON.Headers["topic"], notJSON.Payload = sub.prefix+"events", json.RawMessage(`{"n":`)
	if err := s.Deliver(t.Context(), notJSON); err == nil || !sink.IsPermanent(err) {
		t.Errorf("a payload that is not JSON: %v, want a permanent error", err)
	}
	if got := sub.read(t, "events"); len(got) != 0 {
		t.Errorf("unpublishable messages arrived: %+v", got)
	}
}

// A broker that is down fails the delivery retryably, without quoting the
// password of the URL or of the options.
// Mutation: wrapping connect errors with sink.Permanent fails it.
func TestBrokerDownIsRetryableAndQuotesNoSecret(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pass"
	url := strings.Replace(closedURL(t), "tcp://", "tcp://u:"+password+"@", 1)
	for name, o := range map[string]map[string]any{
		"url":     {"url": url, "topic": "x", "connect_timeout": "1s"},
		"options": {"url": closedURL(t), "topic": "x", "connect_timeout": "1s", "username": "u", "password": password},
	} {
		err := build(t, "s", o).Deliver(t.Context(), delivery("k", 1))
		if err == nil || sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a retryable error", name, err)
		}
		if err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("%s: error quotes the password: %v", name, err)
		}
	}
}

// Options a sink cannot run with are refused at start-up, naming the
// option and never quoting the password.
func TestBadOptionsAreRefused(t *testing.T) {
	t.Parallel()
	brokertest.CheckBadOptions(t, mqttsink.Type.Name, "pw", []brokertest.BadOptions{
		{Name: "no url", Options: map[string]any{"topic": "x"}, Want: "option url: is required"},
		{Name: "scheme", Options: map[string]any{"url": "http://u:pw@h", "topic": "x"}, Want: "option url: scheme must be"},
		{Name: "no host", Options: map[string]any{"url": "tcp://:1883", "topic": "x"}, Want: "option url: has no host"},
		{Name: "no topic", Options: map[string]any{"url": "tcp://h:1883"}, Want: "option topic: is required"},
		{Name: "bad template", Options: map[string]any{"url": "tcp://h:1883", "topic": "{{.Nope}}"}, Want: "option topic: not a valid template"},
		{Name: "qos 2", Options: map[string]any{"url": "tcp://h:1883", "topic": "x", "qos": 2}, Want: "option qos: must be 0 or 1"},
		{Name: "password alone", Options: map[string]any{"url": "tcp://h:1883", "topic": "x", "password": "pw"}, Want: "username is empty"},
	})
}

// The default client id is derived from the sink's name and the host, so
// two sinks (or relays) do not take each other's session.
func TestDefaultClientIDNamesSinkAndHost(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	a := mqttsink.DefaultClientID("a")
	if !strings.HasPrefix(a, "outboxd-a-"+host+"-") || a == mqttsink.DefaultClientID("b") {
		t.Errorf("client ids %q and %q: want outboxd-<sink>-<host>-<pid>, one per sink", a, mqttsink.DefaultClientID("b"))
	}
}
