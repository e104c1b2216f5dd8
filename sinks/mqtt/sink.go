package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the mqtt sink type, "mqtt" in plugins.yaml, with its options
// ([Options]); package sinks/builtin lists it.
var Type = registry.Define("mqtt", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what an mqtt sink delivers to.
const Description = "Publishes each message to an MQTT 3.1.1 broker with QoS 1, in an envelope carrying its delivery id"

// Sink publishes each message to an MQTT broker. It is safe for concurrent
// use: deliveries share one connection, dialed on first use.
type Sink struct {
	name   string
	cfg    config
	link   *sinks.Link[*conn]
	redact secret.Scrubber
}

// Envelope is the payload of each MQTT message: MQTT 3.1.1 has no headers,
// so the delivery id a subscriber de-duplicates on and the trace context
// travel beside the message's JSON.
type Envelope struct {
	// ID is the delivery id, "<sink>/<dedup key>" (sink.Delivery.DeliveryID).
	ID string `json:"id"`
	// Headers are the row's headers and the W3C traceparent and tracestate
	// of the relay's delivery span.
	Headers map[string]string `json:"headers,omitempty"`
	// Payload is the JSON that was enqueued (or that the route rendered).
	Payload json.RawMessage `json:"payload"`
}

// Receipt is what a sent row's receipt column records: the topic the
// message was published on.
type Receipt struct {
	Topic string `json:"topic"`
}

// maxPayload is the largest payload MQTT 3.1.1's remaining length can
// carry (268,435,455 bytes) less room for the fixed and variable headers.
const maxPayload = 268_435_455 - 65_535 - 8

// newSink builds the mqtt sink called name from its decoded options. It
// does not connect: the first delivery does.
func newSink(name string, o Options, _ sink.Env) (*Sink, error) {
	c, err := o.check(name)
	if err != nil {
		return nil, err
	}
	s := &Sink{name: name, cfg: c, redact: secret.NewScrubber(append(secret.Values(map[string]any{"url": c.URL}), string(c.Password))...)}
	s.link = sinks.NewLink(s.dial, c.ConnectTimeout, c.MaxInFlight)
	return s, nil
}

// Shape is the payload routes render for an mqtt sink: body, a template
// producing the JSON of the envelope's payload. Without a template the
// envelope holds the event itself.
func Shape() sink.Shape {
	return sink.Shape{Fields: map[string]sink.FieldKind{sink.FieldBody: sink.Body}}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// conn is one connection to the broker.
type conn struct{ client paho.Client }

func (c *conn) IsClosed() bool { return !c.client.IsConnectionOpen() }

// Close disconnects at once: publishes awaiting their PUBACK fail and
// their rows are delivered again.
func (c *conn) Close() error { c.client.Disconnect(0); return nil }

// dial connects with a clean session. The client's own reconnection is
// off: a broken connection is dialed anew by the sink's [sinks.Connection]
// with its backoff, so deliveries fail fast while the broker is away
// instead of waiting in the client's queue.
func (s *Sink) dial(ctx context.Context) (*conn, error) {
	opts := paho.NewClientOptions().
		AddBroker(s.cfg.URL).
		SetClientID(s.cfg.ClientID).
		SetProtocolVersion(4). // MQTT 3.1.1
		SetCleanSession(true).
		SetOrderMatters(false).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(s.cfg.ConnectTimeout).
		SetWriteTimeout(s.cfg.Timeout)
	if s.cfg.Username != "" {
		opts.SetUsername(s.cfg.Username).SetPassword(string(s.cfg.Password))
	}
	client := paho.NewClient(opts)
	tok := client.Connect()
	if err := wait(ctx, tok); err != nil {
		// A connect given up on may still succeed (the client bounds it
		// by connect_timeout): disconnect it then, so it leaks nothing.
		go func() { tok.Wait(); client.Disconnect(0) }()
		return nil, err
	}
	return &conn{client: client}, nil
}

// wait waits for tok within ctx and returns its error.
func wait(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return fmt.Errorf("waiting for the broker: %w", ctx.Err())
	}
}

// Deliver publishes d on its topic and, with QoS 1, returns once the
// broker's PUBACK arrived. Every failure but a message that cannot be
// published (its topic, its payload) is retried.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	topic, payload, err := s.message(ctx, d)
	if err != nil {
		return s.wrap(sink.Permanent(err))
	}
	c, release, err := s.link.Acquire(ctx, 1)
	if err != nil {
		return s.wrap(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := wait(ctx, c.client.Publish(topic, byte(s.cfg.QoS), s.cfg.Retain, payload)); err != nil {
		return s.wrap(fmt.Errorf("publish on %q: %w", topic, err))
	}
	return d.SetReceipt(Receipt{Topic: topic})
}

// message renders d's topic and envelope.
func (s *Sink) message(ctx context.Context, d *sink.Delivery) (string, []byte, error) {
	topic, err := s.cfg.topic.Render(s.name, d)
	if err != nil {
		return "", nil, err
	}
	if err := checkTopic(topic); err != nil {
		return "", nil, err
	}
	payload, err := json.Marshal(Envelope{ID: d.DeliveryID(), Headers: sinks.MessageHeaders(ctx, d), Payload: d.Payload})
	if err != nil {
		return "", nil, fmt.Errorf("envelope: the payload is not JSON: %w", err)
	}
	if len(payload) > maxPayload {
		return "", nil, fmt.Errorf("envelope of %d bytes is over MQTT's %d", len(payload), maxPayload)
	}
	return topic, payload, nil
}

// checkTopic refuses a topic name MQTT 3.1.1 (4.7) does not allow a
// publish on: empty, over 65535 bytes, not UTF-8, holding NUL or a
// wildcard; and one starting with $, which brokers keep for themselves.
func checkTopic(topic string) error {
	switch {
	case topic == "", len(topic) > 65535, !utf8.ValidString(topic):
		return fmt.Errorf("topic %q is empty, too long or not UTF-8", topic)
	case strings.ContainsAny(topic, "+#\x00"):
		return fmt.Errorf("topic %q holds a wildcard (+, #) or NUL", topic)
	case strings.HasPrefix(topic, "$"):
		return fmt.Errorf("topic %q starts with $, which brokers keep for themselves", topic)
	}
	return nil
}

// Close closes the sink's connection. Deliveries after Close fail.
func (s *Sink) Close() error { return s.link.Close() }

var _ sink.Checker = (*Sink)(nil)

// Check connects with the configured credentials; the broker's CONNACK
// accepting them is the check. Nothing is published.
func (s *Sink) Check(ctx context.Context) error {
	if err := s.link.Connect(ctx); err != nil {
		return s.wrap(err)
	}
	return nil
}

// wrap names the sink in err, keeping its class, and removes secrets a
// client error might quote.
func (s *Sink) wrap(err error) error {
	return s.redact.Error(fmt.Errorf("mqtt %q: %w", s.name, err))
}
