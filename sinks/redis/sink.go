package redis

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the redis sink type, "redis" in plugins.yaml, with its options
// ([Options]); package sinks/builtin lists it.
var Type = registry.Define("redis", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a redis sink delivers to.
const Description = "Adds each message to a Redis stream (XADD), exactly once per delivery id within a de-duplication window"

// Sink adds each message to a Redis stream. It is safe for concurrent use:
// deliveries share one client, made on first use.
type Sink struct {
	name   string
	cfg    config
	link   *sinks.Link[*conn]
	redact secret.Scrubber
}

// Receipt is what a sent row's receipt column records: the stream and the
// entry's id, and whether an earlier attempt had added it (the entry is
// that attempt's).
type Receipt struct {
	Stream    string `json:"stream"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// newSink builds the redis sink called name from its decoded options. It
// does not connect: the first delivery does.
func newSink(name string, o Options, _ sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	quietClientOnce.Do(func() { goredis.SetLogger(debugLog{}) })
	s := &Sink{name: name, cfg: c, redact: secret.NewScrubber(c.client.Password, string(c.Password))}
	s.link = sinks.NewLink(s.dial, c.ConnectTimeout, c.MaxInFlight)
	return s, nil
}

// quietClientOnce sets go-redis's process-wide logger once: its lines
// (a failed dial, a bad connection dropped from the pool) are failures the
// deliveries already report, so they go to the debug level instead of
// standard error.
var quietClientOnce sync.Once

// debugLog logs go-redis's lines at the debug level of slog's default
// logger.
type debugLog struct{}

func (debugLog) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// Shape is the payload routes render for a redis sink: body, a template
// producing the JSON of the entry's payload field. Without a template the
// entry holds the event itself.
func Shape() sink.Shape {
	return sink.Shape{Fields: map[string]sink.FieldKind{sink.FieldBody: sink.Body}}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// conn is the sink's client. go-redis keeps a pool of connections behind
// it and replaces a broken one on the next command, so the client itself
// never needs dialing anew until Close.
type conn struct {
	client *goredis.Client
	closed bool
}

func (c *conn) IsClosed() bool { return c.closed }
func (c *conn) Close() error   { c.closed = true; return c.client.Close() }

// dial makes the client and pings the server, so that a server that is down
// or refuses the credentials fails the first delivery and spaces the next
// tries with the connection's backoff.
func (s *Sink) dial(ctx context.Context) (*conn, error) {
	opts := *s.cfg.client
	if s.cfg.Username != "" {
		opts.Username = s.cfg.Username
	}
	if s.cfg.Password != "" {
		opts.Password = string(s.cfg.Password)
	}
	opts.ClientName = "outboxd-" + s.name
	opts.DialTimeout = s.cfg.ConnectTimeout
	// One dial per try and no command retries: a failure goes back to the
	// outbox at once, and the relay's retry (with its backoff and its
	// attempt budget) decides when to come back.
	opts.DialerRetries, opts.MaxRetries = 1, -1
	// Deadlines are the delivery's (or timeout): a hung server must not
	// hold a delivery past its context.
	opts.ContextTimeoutEnabled = true
	opts.ReadTimeout, opts.WriteTimeout = s.cfg.Timeout, s.cfg.Timeout
	opts.PoolSize = s.cfg.MaxInFlight
	// Protocol 2 and no maintenance notifications: the sink needs neither
	// RESP3's push messages nor the handshake that asks for them.
	opts.Protocol = 2
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	client := goredis.NewClient(&opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, err
	}
	return &conn{client: client}, nil
}

// addOnce adds an entry to a stream unless the delivery id's key says an
// earlier attempt did, in one atomic step on the server:
//
//	KEYS[1] the de-duplication key, KEYS[2] the stream;
//	ARGV[1] the window in milliseconds, ARGV[2] maxlen (0: no trimming),
//	ARGV[3...] the entry's field/value pairs.
//
// It returns {entry id, 1} when the key was there (that attempt's entry),
// {entry id, 0} when it added the entry now.
//
//go:embed addonce.lua
var addOnceSource string

var addOnce = goredis.NewScript(addOnceSource)

// Deliver adds d to its stream unless an attempt within the
// de-duplication window already did. See the package documentation for
// how failures map to outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	stream, args, err := s.entry(ctx, d)
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
	reply, err := addOnce.Run(ctx, c.client, []string{s.cfg.DedupPrefix + d.DeliveryID(), stream}, args...).Slice()
	if err != nil {
		return s.wrap(classify(err))
	}
	id, _ := reply[0].(string)
	dup, _ := reply[1].(int64)
	return d.SetReceipt(Receipt{Stream: stream, ID: id, Duplicate: dup == 1})
}

// entry renders d's stream and the script's arguments: the window, maxlen
// and the entry's fields (id, payload, headers, then the configured ones
// in name order).
func (s *Sink) entry(ctx context.Context, d *sink.Delivery) (string, []any, error) {
	stream, err := s.cfg.stream.Render(s.name, d)
	if err != nil {
		return "", nil, err
	}
	if stream == "" {
		return "", nil, fmt.Errorf("stream template %q rendered an empty key", s.cfg.stream)
	}
	headers, err := json.Marshal(sinks.MessageHeaders(ctx, d))
	if err != nil {
		return "", nil, fmt.Errorf("headers: %w", err)
	}
	args := []any{
		s.cfg.DedupWindow.Milliseconds(), s.cfg.MaxLen,
		FieldID, d.DeliveryID(), FieldPayload, string(d.Payload), FieldHeaders, string(headers),
	}
	for _, name := range s.cfg.names {
		value, err := s.cfg.fields[name].Render(s.name, d)
		if err != nil {
			return "", nil, fmt.Errorf("field %s: %w", name, err)
		}
		args = append(args, name, value)
	}
	return stream, args, nil
}

// DefaultOOMPause is how long the sink pauses when the server is out of
// memory (maxmemory reached with a noeviction policy): consumers must trim
// or read first, and retrying sooner would only spend attempts.
const DefaultOOMPause = 5 * time.Second

// classify maps a failed script run to an outcome:
//
//	the stream's key holds another type (WRONGTYPE),
//	the user may not run the commands (NOPERM)        sink.Permanent
//	out of memory (OOM)                               sink.RetryAfter(DefaultOOMPause)
//	timeouts, lost connections, anything else         retryable
//
// Inside a script a command's error reply keeps its code at the start of
// the message, so the codes are matched by prefix.
func classify(err error) error {
	switch {
	case goredis.HasErrorPrefix(err, "WRONGTYPE"), goredis.HasErrorPrefix(err, "NOPERM"):
		return sink.Permanent(err)
	case goredis.HasErrorPrefix(err, "OOM"):
		return sink.RetryAfter(DefaultOOMPause, err)
	}
	return err
}

// Close closes the sink's client. Deliveries after Close fail.
func (s *Sink) Close() error { return s.link.Close() }

var _ sink.Checker = (*Sink)(nil)

// Check connects with the configured credentials and pings the server;
// nothing is added.
func (s *Sink) Check(ctx context.Context) error {
	c, release, err := s.link.Acquire(ctx, 1)
	if err != nil {
		return s.wrap(err)
	}
	defer release()
	if err := c.client.Ping(ctx).Err(); err != nil {
		return s.wrap(fmt.Errorf("ping: %w", err))
	}
	return nil
}

// wrap names the sink in err, keeping its class, and removes secrets a
// client error might quote.
func (s *Sink) wrap(err error) error {
	return s.redact.Error(fmt.Errorf("redis %q: %w", s.name, err))
}
