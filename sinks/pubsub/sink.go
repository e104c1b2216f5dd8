package pubsub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the pubsub sink type, "pubsub" in plugins.yaml, with its options
// ([Options]); package sinks/builtin lists it.
var Type = registry.Define("pubsub", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a pubsub sink delivers to.
const Description = "Publishes each message to a Google Cloud Pub/Sub topic, ordered by the row's ordering key; at least once, the delivery id in an attribute"

// DeliveryIDAttribute is the attribute that carries the delivery id,
// "<sink>/<dedup key>", on every message: Pub/Sub does not de-duplicate
// publishes, so receivers de-duplicate on it.
const DeliveryIDAttribute = "outbox-delivery-id"

// DefaultQuotaPause is how long the sink pauses when Pub/Sub answers
// RESOURCE_EXHAUSTED (a publish quota or throughput limit): retrying sooner
// would only spend attempts.
const DefaultQuotaPause = 5 * time.Second

// Pub/Sub's documented limits on a message's attributes and ordering key
// (cloud.google.com/pubsub/quotas), checked before publishing so that a row
// breaking them is refused with a clear error.
const (
	maxAttributes        = 100
	maxAttributeKeyLen   = 256
	maxAttributeValueLen = 1024
	maxOrderingKeyLen    = 1024
	reservedPrefix       = "goog" // attribute keys Google keeps for itself
)

// Sink publishes each message to one Pub/Sub topic. It is safe for
// concurrent use: deliveries share one client and publisher, made on first
// use.
type Sink struct {
	name   string
	cfg    config
	link   *sinks.Link[*conn]
	redact secret.Scrubber
}

// Receipt is what a sent row's receipt column records: the topic and the
// message id Pub/Sub assigned.
type Receipt struct {
	Topic     string `json:"topic"`
	MessageID string `json:"message_id"`
}

// newSink builds the pubsub sink called name from its decoded options. It
// neither connects nor reads credentials: the first delivery does.
func newSink(name string, o Options, _ sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	s := &Sink{name: name, cfg: c, redact: secret.NewScrubber(string(c.CredentialsJSON))}
	s.link = sinks.NewLink(s.dial, c.ConnectTimeout, c.MaxInFlight)
	return s, nil
}

// Shape is the payload routes render for a pubsub sink: body, a template
// producing the message's data. Without a template the data is the event
// itself.
func Shape() sink.Shape {
	return sink.Shape{Fields: map[string]sink.FieldKind{sink.FieldBody: sink.Body}}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// conn is the sink's client and its publisher to the topic.
type conn struct {
	client    *gpubsub.Client
	publisher *gpubsub.Publisher
	closed    bool
}

// IsClosed reports a closed conn only: gRPC reconnects a broken connection
// by itself.
func (c *conn) IsClosed() bool { return c.closed }

// Close flushes and stops the publisher, then closes the client.
func (c *conn) Close() error {
	c.closed = true
	c.publisher.Stop()
	return c.client.Close()
}

// noRetry turns the client's own retries of publishes off: a failure goes
// back to the outbox at once, and the relay's retry (with its backoff and
// its attempt budget) decides when to come back. The client's retries
// would also hide the answer (a quota refusal) behind a deadline. The
// publisher wraps the retryer given here (so it must not be nil): one
// retrying on no code.
var noRetry = []gax.CallOption{gax.WithRetry(func() gax.Retryer { return gax.OnCodes(nil, gax.Backoff{}) })}

// dial makes the client (reading credentials_file, or finding Application
// Default Credentials) and the topic's publisher, with message ordering on.
func (s *Sink) dial(ctx context.Context) (*conn, error) {
	opts, err := s.clientOptions()
	if err != nil {
		return nil, err
	}
	cc := &gpubsub.ClientConfig{TopicAdminCallOptions: &vkit.TopicAdminCallOptions{Publish: noRetry}}
	client, err := gpubsub.NewClientWithConfig(ctx, s.cfg.Project, cc, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	p := client.Publisher(s.cfg.Topic)
	p.EnableMessageOrdering = true
	p.PublishSettings.Timeout = s.cfg.Timeout
	return &conn{client: client, publisher: p}, nil
}

// clientOptions are the client's endpoint and credentials.
func (s *Sink) clientOptions() ([]option.ClientOption, error) {
	switch {
	case s.cfg.Endpoint != "":
		return []option.ClientOption{
			option.WithEndpoint(s.cfg.Endpoint),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		}, nil
	case s.cfg.CredentialsJSON != "":
		return []option.ClientOption{option.WithAuthCredentialsJSON(s.cfg.credType, []byte(s.cfg.CredentialsJSON))}, nil
	case s.cfg.CredentialsFile != "":
		raw, err := os.ReadFile(s.cfg.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("credentials_file: %w", err)
		}
		t, err := credentialType(raw)
		if err != nil {
			return nil, fmt.Errorf("credentials_file %s: %w", s.cfg.CredentialsFile, err)
		}
		return []option.ClientOption{option.WithAuthCredentialsJSON(t, raw)}, nil
	}
	return nil, nil
}

// Deliver publishes d and waits for Pub/Sub's message id. See the package
// documentation for how failures map to outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	msg, err := message(ctx, d)
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
	id, err := c.publisher.Publish(ctx, msg).Get(ctx)
	if err != nil {
		if msg.OrderingKey != "" {
			// A failed publish pauses its ordering key in the publisher,
			// refusing every later message of the key until resumed. The
			// relay retries the key's messages in order, so the next
			// attempt may go.
			c.publisher.ResumePublish(msg.OrderingKey)
		}
		return s.wrap(classify(err))
	}
	return d.SetReceipt(Receipt{Topic: s.cfg.Topic, MessageID: id})
}

// message is d as a Pub/Sub message: its payload as data, its ordering key,
// and as attributes the row's headers, the trace context and the delivery
// id. It refuses what Pub/Sub would refuse.
func message(ctx context.Context, d *sink.Delivery) (*gpubsub.Message, error) {
	if len(d.OrderingKey) > maxOrderingKeyLen {
		return nil, fmt.Errorf("ordering key of %d bytes: Pub/Sub takes at most %d", len(d.OrderingKey), maxOrderingKeyLen)
	}
	attrs := sinks.MessageHeaders(ctx, d)
	attrs[DeliveryIDAttribute] = d.DeliveryID()
	if len(attrs) > maxAttributes {
		return nil, fmt.Errorf("%d attributes (headers, trace context and delivery id): Pub/Sub takes at most %d", len(attrs), maxAttributes)
	}
	for k, v := range attrs {
		switch {
		case k == "" || len(k) > maxAttributeKeyLen:
			return nil, fmt.Errorf("header %q: Pub/Sub takes attribute names of 1 to %d bytes", k, maxAttributeKeyLen)
		case strings.HasPrefix(strings.ToLower(k), reservedPrefix):
			return nil, fmt.Errorf("header %q: Pub/Sub reserves attribute names starting with %q", k, reservedPrefix)
		case len(v) > maxAttributeValueLen:
			return nil, fmt.Errorf("header %q: a value of %d bytes, Pub/Sub takes at most %d", k, len(v), maxAttributeValueLen)
		}
	}
	return &gpubsub.Message{Data: d.Payload, Attributes: attrs, OrderingKey: d.OrderingKey}, nil
}

// classify maps a failed publish to an outcome:
//
//	the topic does not exist (NOT_FOUND), the message is
//	invalid or too large (INVALID_ARGUMENT, oversized),
//	the credentials may not publish (PERMISSION_DENIED,
//	UNAUTHENTICATED)                                     sink.Permanent
//	a quota is exhausted (RESOURCE_EXHAUSTED)            sink.RetryAfter(DefaultQuotaPause)
//	timeouts, unavailable, a paused key, anything else   retryable
func classify(err error) error {
	if errors.Is(err, gpubsub.ErrOversizedMessage) {
		return sink.Permanent(err)
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.NotFound, codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated:
			return sink.Permanent(err)
		case codes.ResourceExhausted:
			return sink.RetryAfter(DefaultQuotaPause, err)
		}
	}
	return err
}

// Close flushes and stops the publisher and closes the client. Deliveries
// after Close fail.
func (s *Sink) Close() error { return s.link.Close() }

// wrap names the sink in err, keeping its class, and removes the
// credentials a client error might quote.
func (s *Sink) wrap(err error) error {
	return s.redact.Error(fmt.Errorf("pubsub %q: %w", s.name, err))
}
