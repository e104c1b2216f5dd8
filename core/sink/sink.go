// Package sink is the contract between outboxd's relay and the sinks that
// deliver its messages: the one package a sink author imports. It depends
// on nothing of outboxd; outside the standard library it imports only
// OpenTelemetry's trace and metric API packages, for the providers of the
// environment a sink is built in ([Env]).
//
// A sink implements [Sink]. Everything else is optional, and every optional
// interface the relay looks for is listed here, in one place:
//
//   - [BatchSink]: hands many messages to the receiver per round trip;
//     the relay gives the sink a claim loop of its own.
//   - [RateLimitDefaulter]: the receiver documents a rate limit, used
//     when the configuration sets none.
//   - [RateKeyer]: names the key each delivery's per-key rate limit
//     counts by (a Slack channel), for rate_limit.per_key.
//   - [Shaper]: declares the payload's fields, so routes' templates render
//     into them ([Shape]); without it any field renders as text.
//   - [Checker]: checks credentials or reachability without delivering a
//     message, for `outboxd sinks test`; a sink without it (or whose
//     Check answers [ErrCannotCheck]) is tested with a marked test
//     message, and only when the operator agrees to one.
//   - [DigestSink]: delivers a digest's members as one delivery (one post,
//     one mail, one call with a list); a sink configured with a digest
//     ([DigestPolicy]) must implement it. Its error may refuse single
//     members ([RefuseMembers]).
//   - [UncertainChecker]: looks for an Uncertain attempt's effect at the
//     receiver before sending again (Slack looks for its post); the relay
//     then claims the sink's rows durably, so that a PostgreSQL crash
//     cannot forget an attempt that may have started.
//   - io.Closer: releases what the sink holds (connections, producers).
//     Whoever built the sink closes it once, after the relay has stopped
//     delivering to it.
//
// A sink that speaks HTTP also reports each attempt's answer (status, the
// start of its body, the address it went to) with [RecordAnswer]; the
// relay stores it with the attempt.
//
// Deliver's error says what happens next: nil (delivered), [Permanent]
// (dead-letter now), [RetryAfter] (come back later, attempt not spent) or
// any other error (retry with backoff).
//
// A sink's life: its host (the configuration's loader, or a program that
// builds sinks in Go) builds it from its options and an [Env], without any
// I/O, since checking a configuration builds every sink; the relay
// delivers through it; whoever built it closes it. Package registry turns
// a type's options struct and constructor into a sink type that
// plugins.yaml can name.
package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// RateLimit allows a sustained Rate deliveries per Per across the whole
// cluster, with at most Burst of them back to back after an idle spell; so in
// any window of length Per at most Rate+Burst deliveries start, spread evenly.
type RateLimit struct {
	Rate  int
	Per   time.Duration
	Burst int
	// PerKey applies the limit to each rate key of the sink on its own
	// (for Slack: each channel) instead of to the sink as a whole. The sink
	// must implement RateKeyer.
	PerKey bool
}

// Interval is the even spacing between two deliveries: Per divided by
// Rate.
func (r RateLimit) Interval() time.Duration { return r.Per / time.Duration(r.Rate) }

// Sink delivers one message to an external system, its receiver. It is the
// one interface a user implements to add an integration; the relay calls
// it outside any database transaction, possibly concurrently for different
// rows.
//
// Deliver returns nil when the message was accepted by the receiver. Any
// other error is retryable unless wrapped with [Permanent] (dead-letter now)
// or [RetryAfter] (come back later without spending an attempt).
//
// A sink must honour ctx: its deadline sits safely inside the row's lease, and
// a delivery that outlives the lease may be repeated by another relay.
type Sink interface {
	Deliver(ctx context.Context, d *Delivery) error
}

// Func adapts a plain function to the [Sink] interface.
type Func func(ctx context.Context, d *Delivery) error

// Deliver calls f(ctx, d).
func (f Func) Deliver(ctx context.Context, d *Delivery) error { return f(ctx, d) }

// BatchSink is implemented by sinks that can hand many messages to their
// receiver per round trip (a broker's asynchronous publishes, whose
// acknowledgements are awaited together). The relay then gives the sink a
// claim loop of its own and hands it its claimed rows together instead of
// one Deliver call each. Simple sinks need not implement it.
//
// DeliverBatch returns one outcome per delivery, in the same order,
// classified as Deliver's are (nil, retryable, [Permanent], [RetryAfter]);
// receipts are set on the deliveries that succeeded. ctx bounds the whole
// batch; each delivery's own [Delivery.Context] carries its trace span,
// for propagation into the messages. A batch never holds two rows of one
// ordering key.
type BatchSink interface {
	Sink
	DeliverBatch(ctx context.Context, ds []*Delivery) []error
}

// RateLimitDefaulter is implemented by sinks whose receiver documents a
// rate limit (Slack's one message per second per channel, for example). The
// relay uses it when the sink's configuration sets no rate_limit.
type RateLimitDefaulter interface {
	DefaultRateLimit() RateLimit
}

// RateKeyer is implemented by sinks that deliver to several places of
// their receiver and can name, before delivering, the key a delivery's
// per-key rate limit counts by (Slack: the channel it posts to; a mail:
// its recipients). A sink whose RateLimit has PerKey set must implement
// it: the relay then spaces deliveries per rate key, cluster-wide, instead
// of per sink, and keeps a key's pauses, circuit breaker and digests apart
// from the other keys'. An error is the delivery's outcome, as if Deliver
// had returned it (wrap it with [Permanent] when retrying cannot help).
type RateKeyer interface {
	RateKey(d *Delivery) (string, error)
}

// UncertainChecker is implemented by sinks whose receiver takes no
// idempotency key and which, given an Uncertain delivery, look for the
// earlier attempt's effect before sending again (Slack searches the
// channel for its post). For a sink whose ChecksUncertain answers true the
// relay makes each claim of its rows durable (the claim's commit waits
// for PostgreSQL's WAL flush before any delivery starts), so that after a
// PostgreSQL crash a row whose delivery may have started comes back
// Uncertain and the check runs. Other sinks' claims commit
// asynchronously: a crash of PostgreSQL (not a clean restart) may forget
// the claims of its last fraction of a second, whose rows are then
// delivered again as first attempts, not Uncertain, under the same
// DedupKey; the flush saved is most of a message's latency on a busy disk.
type UncertainChecker interface {
	ChecksUncertain() bool
}

// Delivery is one attempt at delivering one outbox row.
type Delivery struct {
	ID          int64             // the row's id
	Sink        string            // the configured sink instance name (the row's sink column)
	DedupKey    string            // unique per sink; stable across retries
	Payload     json.RawMessage   // exactly the JSON that was enqueued
	Headers     map[string]string // trace context and other metadata
	OrderingKey string            // empty when the row is unordered
	Attempt     int               // 1 for the first attempt
	MaxAttempts int               // the attempt after which the row is dead-lettered
	CreatedAt   time.Time         // when the row was enqueued (database clock)

	// Uncertain reports that an earlier attempt's outcome is unknown: the
	// relay that made it lost its lease (it crashed, or the delivery outlived
	// the lease) before recording a result. A sink without an idempotency key
	// at the receiver (Slack) checks whether that attempt went through
	// before sending again; it implements [UncertainChecker], or a
	// PostgreSQL crash may forget the attempt instead.
	Uncertain bool

	// Route is the route that published the row (see [Publish]); empty for
	// a message enqueued directly. A published row's Payload is its event,
	// {"type", "key", "data"}, which package routing renders into the
	// sink's own payload before the sink sees it.
	Route string
	// RouteVersion is the version of the routes the row was published
	// under, whose target renders it; 0 when Route is empty or the row was
	// published before routes versions were recorded on rows.
	RouteVersion int64
	// ThreadKey is set when the row belongs to a thread: the rows of one
	// sink sharing it form one conversation, delivered in order.
	ThreadKey string
	// ThreadRoot is the receipt of the thread's first delivered row (for
	// Slack its channel and ts), nil when the row is not in a thread or is
	// its first row. A sink that can thread messages replies to it; the
	// receipt outlives the root row's retention.
	ThreadRoot json.RawMessage

	receipt json.RawMessage
	ctx     context.Context // the attempt's own context: its span and deadline
}

// DeliveryID is the id a receiver de-duplicates d's message on (webhook-id,
// Nats-Msg-Id, the AMQP message-id, Kafka's outbox-delivery-id header):
// "<sink>/<dedup key>", the sink's name path-escaped (a "/" in it becomes
// %2F; names plugins.yaml allows are unchanged). Dedup keys are unique per
// sink only, and every target of a route is a row of its own sink, so the
// sink's name makes the id unique across the sinks and route targets of an
// outbox; it is the same on every attempt, redrives included.
func (d *Delivery) DeliveryID() string {
	return url.PathEscape(d.Sink) + "/" + d.DedupKey
}

// WithContext returns a shallow copy of d whose [Delivery.Context] is ctx.
// The relay gives each attempt its own context this way; a sink has no
// need to call it.
func (d *Delivery) WithContext(ctx context.Context) *Delivery {
	c := *d
	c.ctx = ctx
	return &c
}

// Context returns the context of this delivery attempt: its trace span (a
// child of the producer's) and its deadline. It is the ctx Deliver gets; a
// [BatchSink] uses it to propagate each message's own trace context.
func (d *Delivery) Context() context.Context {
	if d.ctx == nil {
		return context.Background()
	}
	return d.ctx
}

// SetReceipt records what the receiver returned for a successful delivery
// (Slack's channel and ts, an SMTP message id, ...). It is stored as JSON in
// the row's receipt column so an operator can find the delivered message.
func (d *Delivery) SetReceipt(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("outbox: encode receipt: %w", err)
	}
	d.receipt = b
	return nil
}

// Receipt returns the receipt recorded with [Delivery.SetReceipt], or nil.
func (d *Delivery) Receipt() json.RawMessage { return d.receipt }

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + errString(e.err) }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err to say that retrying cannot help (bad payload, unknown
// channel, revoked credentials): the row is dead-lettered at once.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, came from [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError asks for a later attempt at a time the receiver chose.
type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %s", e.after, errString(e.err))
}
func (e *retryAfterError) Unwrap() error { return e.err }

// MaxRetryAfter caps the wait a receiver's Retry-After may impose. The
// pause holds the whole sink (or rate key) across the cluster, so a
// receiver answering "Retry-After: 99999999" must not stop it for years;
// after the cap the relay simply asks again.
const MaxRetryAfter = time.Hour

// RetryAfter wraps err to say the receiver asked us to wait d (HTTP 429 or
// 503 with Retry-After), at most MaxRetryAfter. The row is rescheduled
// without spending an attempt, because rate limiting is not failure, no
// sooner than the sink's backoff would retry it (a Retry-After of 0 is no
// licence to hammer), and the whole sink (a per_key sink: the rate key)
// pauses cluster-wide for d. Its deferrals are bounded by the sink's
// max_deferrals, after which it is dead-lettered.
func RetryAfter(d time.Duration, err error) error {
	d = min(max(d, 0), MaxRetryAfter)
	if err == nil {
		err = errors.New("rate limited")
	}
	return &retryAfterError{after: d, err: err}
}

// RetryAfterDelay returns the delay requested by a [RetryAfter] error in err's
// chain, and whether there was one.
func RetryAfterDelay(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// statusError carries the status code a receiver answered with.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return errString(e.err) }
func (e *statusError) Unwrap() error { return e.err }

// HTTPStatus wraps err, a receiver's unsuccessful answer, with its HTTP
// status code. It changes neither the error's text nor its class
// ([Permanent], [RetryAfter]); it lets the relay's circuit breaker tell a
// receiver that is unwell (502, 503, 504, a run of 5xx) from a message
// it refuses (4xx).
func HTTPStatus(code int, err error) error {
	if err == nil {
		err = fmt.Errorf("HTTP %d", code)
	}
	return &statusError{code: code, err: err}
}

// StatusCode returns the HTTP status code of an [HTTPStatus] error in
// err's chain, and whether there was one.
func StatusCode(err error) (int, bool) {
	var s *statusError
	if errors.As(err, &s) {
		return s.code, true
	}
	return 0, false
}

// Checker is implemented by sinks that can tell, without delivering a
// message, whether they could deliver now: their credentials are accepted
// (Slack's auth.test), their server answers (an SMTP EHLO, a broker's
// handshake). `outboxd sinks test` calls it. Check must not deliver or
// store anything at the receiver, and must honour ctx.
type Checker interface {
	Check(ctx context.Context) error
}

// ErrCannotCheck is what a Checker's Check answers when this instance has
// no way to check without sending (a Slack incoming webhook): the caller
// may send a test message instead.
var ErrCannotCheck = errors.New("sink: this sink cannot be checked without sending a message")
