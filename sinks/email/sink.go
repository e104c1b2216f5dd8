package email

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wneessen/go-mail"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
)

// DefaultConnectTimeout bounds connecting to the SMTP server and each
// command of the exchange that follows, unless the delivery's context
// expires sooner.
const DefaultConnectTimeout = 15 * time.Second

// Type is the email sink type, "email" in plugins.yaml, with its options
// ([Options]) and payload shape ([Shape]); package sinks/builtin lists it.
// Its sinks are *Sink.
var Type = registry.Define("email", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what an email sink delivers to.
const Description = "Sends each message as one mail over SMTP"

// Sink sends each delivery as one mail over SMTP. It is safe for concurrent
// use: every delivery opens its own SMTP connection.
type Sink struct {
	name   string
	cfg    Options
	server server
	tracer trace.Tracer
}

// newSink builds the email sink called name from its decoded options; it
// records its SMTP spans with env's tracer provider. Its errors name the
// option at fault.
func newSink(name string, cfg Options, env sink.Env) (*Sink, error) {
	srv, err := cfg.check()
	if err != nil {
		return nil, err
	}
	return &Sink{name: name, cfg: cfg, server: srv, tracer: env.TracerProvider.Tracer(tracerName)}, nil
}

// Deliver sends d as one mail. See the package documentation for the
// payload, the Message-ID and how SMTP replies map to outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	p, err := parsePayload(d.Payload, s.cfg.To)
	if err == nil {
		err = s.checkRecipients(p)
	}
	if err != nil {
		return sink.Permanent(fmt.Errorf("email sink %q: %w", s.name, err))
	}
	root, err := threadRoot(d)
	if err != nil {
		return sink.Permanent(fmt.Errorf("email sink %q: %w", s.name, err))
	}
	receipt, err := s.mail(ctx, p, MessageID(s.name, d.DedupKey, s.server.domain), root, d.CreatedAt)
	if err != nil {
		return fmt.Errorf("email sink %q: %w", s.name, err)
	}
	return d.SetReceipt(receipt)
}

// mail composes p under messageID and sends it, returning its receipt:
// the Message-ID and the server's answer. A mail that cannot be composed
// is a permanent error.
func (s *Sink) mail(ctx context.Context, p Payload, messageID, root string, created time.Time) (map[string]string, error) {
	msg, err := s.compose(p, messageID, root, created)
	if err != nil {
		return nil, sink.Permanent(err)
	}
	if err := s.send(ctx, msg, len(p.To)+len(p.Cc)); err != nil {
		return nil, err
	}
	receipt := map[string]string{"message_id": messageID}
	if r := msg.ServerResponse(); r != "" {
		receipt["server_response"] = r
	}
	return receipt, nil
}

// threadRoot is the Message-ID of the first mail of d's thread (the
// receipt the relay keeps for a thread_key, as for Slack's root post), ""
// when d is not a reply.
func threadRoot(d *sink.Delivery) (string, error) {
	if d.ThreadRoot == nil {
		return "", nil
	}
	var r struct {
		MessageID string `json:"message_id"`
	}
	if err := json.Unmarshal(d.ThreadRoot, &r); err != nil {
		return "", fmt.Errorf("thread root receipt %s: %w", d.ThreadRoot, err)
	}
	return r.MessageID, nil
}

// checkRecipients applies the allowed_recipient_domains option to a
// payload's recipients.
func (s *Sink) checkRecipients(p Payload) error {
	if err := s.cfg.checkDomains("payload: to", p.To); err != nil {
		return err
	}
	return s.cfg.checkDomains("payload: cc", p.Cc)
}

// client returns a go-mail client for one delivery. A fresh client per
// delivery keeps concurrent deliveries independent and lets the timeout
// follow ctx's deadline.
func (s *Sink) client(ctx context.Context) (*mail.Client, error) {
	timeout := DefaultConnectTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(deadline), time.Millisecond))
	}
	opts := []mail.Option{mail.WithPort(s.server.port), mail.WithTimeout(timeout)}
	switch s.cfg.TLS {
	case TLSImplicit:
		opts = append(opts, mail.WithSSL())
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if s.cfg.Username != "" {
		opts = append(opts,
			mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.cfg.Username),
			mail.WithPassword(string(s.cfg.Password)))
	}
	c, err := mail.NewClient(s.server.host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp client: %w", err)
	}
	return c, nil
}

// Shape is the payload routes render for a mail: subject, text,
// html (rendered with html/template) and to (a comma-separated list that
// replaces the sink's recipients); one of text and html is required.
func Shape() sink.Shape {
	return sink.Shape{
		Fields: map[string]sink.FieldKind{"subject": sink.Text, "text": sink.Text, "html": sink.HTML, "to": sink.List},
		OneOf:  []string{"text", "html"},
	}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

var _ sink.Checker = (*Sink)(nil)

// Check connects to the SMTP server, says EHLO, starts TLS and logs in as
// configured, then quits; no mail is sent.
func (s *Sink) Check(ctx context.Context) error {
	c, err := s.client(ctx)
	if err != nil {
		return fmt.Errorf("email sink %q: %w", s.name, err)
	}
	if err := c.DialWithContext(ctx); err != nil {
		return fmt.Errorf("email sink %q: %w", s.name, err)
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("email sink %q: quit: %w", s.name, err)
	}
	return nil
}
