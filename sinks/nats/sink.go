package nats

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Sink publishes each message to a JetStream stream. It is safe for
// concurrent use: deliveries share one connection, dialed on first use.
type Sink struct {
	name   string
	cfg    config
	link   *sinks.Link[*conn]
	redact secret.Scrubber
}

// Receipt is what a sent row's receipt column records: where the stream
// stored the message, and whether it was a duplicate the stream dropped
// (an earlier attempt had stored it).
type Receipt struct {
	Stream    string `json:"stream"`
	Sequence  uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// Type is the nats sink type, "nats" in plugins.yaml, with its options
// ([Options]); package sinks/builtin lists it.
var Type = registry.Define("nats", Description, DefaultOptions(), newSink)

// Description says in one line what a nats sink delivers to.
const Description = "Publishes each message to a NATS JetStream stream, the delivery id <sink>/<dedup key> as its message id"

// newSink builds the nats sink called name from its decoded options. It
// does not connect: the first delivery does. See the package documentation
// for the options.
func newSink(name string, o Options, _ sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	s := &Sink{name: name, cfg: c, redact: secret.NewScrubber(append(urlPasswords(c.URL), string(c.Password), string(c.Token))...)}
	s.link = sinks.NewLink(s.dial, c.ConnectTimeout, c.MaxInFlight)
	return s, nil
}

// conn is one connection to the server with its JetStream context.
type conn struct {
	nc *natsio.Conn
	js jetstream.JetStream
}

func (c *conn) IsClosed() bool { return c.nc.IsClosed() }
func (c *conn) Close() error   { c.nc.Close(); return nil }

// dial connects to the server. The client's own reconnection is off: a
// broken connection is closed, and the sink's [sinks.Connection] dials
// anew with its backoff, so deliveries fail fast while the server is away
// instead of waiting in the client's reconnect buffer.
func (s *Sink) dial(context.Context) (*conn, error) {
	opts := []natsio.Option{
		natsio.Name("outboxd sink " + s.name),
		natsio.Timeout(s.cfg.ConnectTimeout),
		natsio.NoReconnect(),
		natsio.NoCallbacksAfterClientClose(),
		// Async errors (slow consumer, permission violations) surface in
		// the publishes they concern; the default handler would print them.
		natsio.ErrorHandler(func(*natsio.Conn, *natsio.Subscription, error) {}),
	}
	switch {
	case s.cfg.Username != "":
		opts = append(opts, natsio.UserInfo(s.cfg.Username, string(s.cfg.Password)))
	case s.cfg.Token != "":
		opts = append(opts, natsio.Token(string(s.cfg.Token)))
	case s.cfg.CredentialsFile != "":
		opts = append(opts, natsio.UserCredentials(s.cfg.CredentialsFile))
	case s.cfg.NKeySeedFile != "":
		opt, err := natsio.NkeyOptionFromSeed(s.cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("option nkey_seed_file: %w", err)
		}
		opts = append(opts, opt)
	}
	nc, err := natsio.Connect(s.cfg.URL, opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &conn{nc: nc, js: js}, nil
}

// Deliver publishes d on its subject with Nats-Msg-Id set to the dedup key
// and returns once the stream acknowledged it. See the package
// documentation for how failures map to outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	msg, err := s.message(ctx, d)
	if err != nil {
		return s.wrap(sink.Permanent(err))
	}
	c, release, err := s.link.Acquire(ctx, 1)
	if err != nil {
		return s.wrap(err)
	}
	defer release()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	ack, err := c.js.PublishMsg(pctx, msg, s.publishOptions(d)...)
	if err != nil {
		return s.wrap(s.classify(ctx, c, msg.Subject, err))
	}
	return d.SetReceipt(Receipt{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate})
}

// message builds the NATS message of d: its subject, the payload as it
// was enqueued, and the row's headers with the delivery's trace context.
func (s *Sink) message(ctx context.Context, d *sink.Delivery) (*natsio.Msg, error) {
	subject, err := s.cfg.subject.Render(s.name, d)
	if err != nil {
		return nil, err
	}
	if err := checkSubject(subject); err != nil {
		return nil, err
	}
	msg := natsio.NewMsg(subject)
	msg.Data = d.Payload
	for k, v := range sinks.MessageHeaders(ctx, d) {
		msg.Header.Set(k, v)
	}
	return msg, nil
}

// publishOptions carry the dedup key as Nats-Msg-Id, so the stream drops a
// second copy within its duplicate window, and the expected stream.
func (s *Sink) publishOptions(d *sink.Delivery) []jetstream.PublishOpt {
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(d.DeliveryID())}
	if s.cfg.Stream != "" {
		opts = append(opts, jetstream.WithExpectStream(s.cfg.Stream))
	}
	return opts
}

// Close closes the sink's connection. Deliveries after Close fail.
func (s *Sink) Close() error { return s.link.Close() }

var _ sink.Checker = (*Sink)(nil)

// Check connects (with the configured credentials) and asks the server
// for the account's JetStream information, which fails when JetStream is
// not enabled for it; nothing is published.
func (s *Sink) Check(ctx context.Context) error {
	c, release, err := s.link.Acquire(ctx, 1)
	if err != nil {
		return s.wrap(err)
	}
	defer release()
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return s.wrap(fmt.Errorf("jetstream account info: %w", err))
	}
	return nil
}

// wrap names the sink in err, keeping its class, and removes secrets a
// client error might quote.
func (s *Sink) wrap(err error) error {
	return s.redact.Error(fmt.Errorf("nats %q: %w", s.name, err))
}

// checkSubject refuses a rendered subject the server would reject or
// treat as a wildcard.
func checkSubject(subject string) error {
	if subject == "" || strings.ContainsAny(subject, " \t\r\n") {
		return fmt.Errorf("subject %q is empty or holds white space", subject)
	}
	for _, token := range strings.Split(subject, ".") {
		if token == "" || token == "*" || token == ">" {
			return fmt.Errorf("subject %q has an empty or wildcard token", subject)
		}
	}
	return nil
}

// urlPasswords returns the passwords in a comma-separated URL list, for
// redaction.
func urlPasswords(list string) []string {
	var out []string
	for _, raw := range strings.Split(list, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			} else {
				out = append(out, u.User.Username()) // nats://token@host
			}
		}
	}
	return out
}
