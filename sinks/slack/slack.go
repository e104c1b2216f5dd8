package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the slack sink type, "slack" in plugins.yaml, with its options
// ([Options]) and payload shape ([Shape]); package sinks/builtin lists it.
// Its sinks are *Sink.
var Type = registry.Define("slack", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a slack sink delivers to.
const Description = "Posts each message to Slack, with a bot token (exactly once) or an incoming webhook"

// Slack's documented chat.postMessage limit, one message per second per
// channel, is the sink's rate limit unless its configuration sets one.
const (
	DefaultRate  = 1
	DefaultPer   = time.Second
	DefaultBurst = 1
)

// DefaultHTTPTimeout bounds one HTTP request to Slack (Slack's own answer
// time can exceed the shared client's default). The relay's context deadline
// is normally shorter; this is the backstop.
const DefaultHTTPTimeout = 30 * time.Second

// Sink posts messages to Slack. [Type] builds it.
type Sink struct {
	name string
	opts Options
	log  *slog.Logger // the environment's, naming the sink
	http *http.Client
	api  *slackapi.Client // nil in webhook mode
	// channels caches channel name -> ID for the duplicate check.
	channels *channelCache
}

var (
	_ sink.RateLimitDefaulter = (*Sink)(nil)
	_ sink.Checker            = (*Sink)(nil)
)

// newSink builds the slack sink called name from its decoded options; it
// logs through env's logger and traces its calls to Slack with env's
// tracer provider. Errors name the option at fault and never quote a token
// or webhook URL.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	o, err := o.check()
	if err != nil {
		return nil, err
	}
	s := &Sink{
		name:     name,
		opts:     o,
		log:      env.Logger,
		channels: newChannelCache(),
		// AllowPrivate: the URLs come from the operator's own configuration,
		// and tests and proxies live on private addresses.
		// Token mode calls API methods: their paths are worth tracing. A
		// webhook URL's path is its secret and stays redacted.
		// Each call's answer is recorded for the relay (sink.RecordAnswer):
		// the last call of a delivery, its post, is its attempt's.
		http: sinks.RecordingClient(netguard.NewHTTPClient(netguard.HTTPClientOptions{Timeout: DefaultHTTPTimeout, AllowPrivate: true,
			TraceURLPath: o.Token != "", TracerProvider: env.TracerProvider})),
	}
	if o.Token != "" {
		s.api = slackapi.New(string(o.Token), slackapi.OptionAPIURL(o.APIURL), slackapi.OptionHTTPClient(s.http))
	}
	return s, nil
}

// DefaultRateLimit is Slack's one message per second.
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: DefaultPer, Burst: DefaultBurst}
}

// ChecksUncertain reports whether the sink looks for an earlier attempt's
// post before posting again (history dedupe, on by default in token mode):
// the relay then claims its rows durably (sink.UncertainChecker), so that
// the look happens after a PostgreSQL crash too.
func (s *Sink) ChecksUncertain() bool { return s.opts.dedupe() }

// Deliver posts one message. See the package documentation for the payload,
// the error classes, threads and the exactly-once check.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	m, err := parsePayload(d.Payload, s.opts.EscapeMentions)
	if err != nil {
		return s.fail(d, err)
	}
	if m.Channel != "" && !s.opts.allowsChannel(m.Channel) {
		return s.fail(d, sink.Permanent(fmt.Errorf("payload channel %q is not the channel option nor in allowed_channels", m.Channel)))
	}
	if s.api == nil {
		return s.fail(d, s.postWebhook(ctx, m))
	}
	root, err := parseThreadRoot(d)
	if err != nil {
		return s.fail(d, err)
	}
	channel := s.channelOf(m, root)
	if err := s.checkChannel(channel); err != nil {
		return s.fail(d, err)
	}
	if root != nil && m.ThreadTS == "" {
		m.ThreadTS = root.TS
	}
	posted, err := s.post(ctx, d, m, channel)
	if err != nil {
		return s.fail(d, err)
	}
	if m.UpdateRoot && root != nil {
		// After the reply, and again on a retry that finds the reply
		// posted: chat.update sets the same content each time.
		if err := s.updateRoot(ctx, root, m); err != nil {
			return s.fail(d, err)
		}
	}
	return s.receipt(d, posted)
}

// post posts m to channel unless an earlier attempt at d already did (see
// the package documentation), and returns where the post is.
func (s *Sink) post(ctx context.Context, d *sink.Delivery, m message, channel string) (postedAt, error) {
	at := postedAt{threadTS: m.ThreadTS}
	if s.opts.dedupe() && (d.Uncertain || d.Attempt > 1) {
		// An earlier attempt may have posted and died before its outcome
		// was recorded; Slack has no idempotency key, so look.
		id, ts, err := s.earlierPost(ctx, d, channel, m.ThreadTS)
		switch {
		case errors.Is(err, errUnresolved):
			at.dedupeSkipped = err.Error()
			s.log.Warn("slack sink posts without the duplicate check", "row", d.ID, "channel", channel, "reason", at.dedupeSkipped)
		case err != nil:
			return at, err
		case ts != "":
			at.channel, at.ts = id, ts
			return at, nil
		}
	}
	opts := append(m.msgOptions(s.opts), slackapi.MsgOptionMetadata(metadata(d)))
	respChannel, ts, err := s.api.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return at, classify(s.call("chat.postMessage", channel), err)
	}
	s.learn(channel, respChannel)
	at.channel, at.ts = respChannel, ts
	return at, nil
}

// checkChannel refuses a missing channel, and an @user channel when dedupe
// needs an ID.
func (s *Sink) checkChannel(channel string) error {
	if channel == "" {
		return sink.Permanent(errors.New("no channel: set the channel option or the payload's channel"))
	}
	if s.opts.dedupe() {
		if err := checkDedupeChannel(channel); err != nil {
			return sink.Permanent(fmt.Errorf("payload channel: %w", err))
		}
	}
	return nil
}

// Receipt keys besides channel and ts.
const (
	// ReceiptDedupeSkipped, when present, says why a retried row was
	// posted without the duplicate check (its channel name could not be
	// resolved to an ID), so a duplicate message is possible.
	ReceiptDedupeSkipped = "dedupe_skipped"
	// ReceiptThreadTS is the ts of the thread a reply was posted in.
	ReceiptThreadTS = "thread_ts"
)

// postedAt is where a message is, for its receipt.
type postedAt struct {
	channel, ts   string
	threadTS      string // the thread it replies in, if any
	dedupeSkipped string // why the duplicate check was skipped, if it was
}

// receipt records where the message is: Slack's channel ID and ts, the
// thread it is in, and the reason the duplicate check was skipped, if it
// was. A thread's first message's receipt is the root its later messages
// reply to (sink.Delivery.ThreadRoot).
func (s *Sink) receipt(d *sink.Delivery, at postedAt) error {
	r := map[string]string{"channel": at.channel, "ts": at.ts}
	if at.threadTS != "" {
		r[ReceiptThreadTS] = at.threadTS
	}
	if at.dedupeSkipped != "" {
		r[ReceiptDedupeSkipped] = at.dedupeSkipped
	}
	return d.SetReceipt(r)
}

// postWebhook posts to the incoming webhook. It cannot check for an earlier
// post, so a retry after an uncertain attempt may post twice.
func (s *Sink) postWebhook(ctx context.Context, m message) error {
	err := slackapi.PostWebhookCustomHTTPContext(ctx, string(s.opts.WebhookURL), s.http, m.webhookMessage(s.opts))
	return classify("incoming webhook", err)
}

// call names an API call for error messages.
func (s *Sink) call(method, channel string) string {
	return method + " to " + channel
}

// fail prefixes a delivery error with the sink's name, keeping its class.
func (s *Sink) fail(d *sink.Delivery, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("slack sink %q, row %d: %w", s.name, d.ID, err)
}

// Check calls auth.test with the bot token: Slack answers whether it
// accepts the token, and nothing is posted. An incoming webhook cannot be
// checked without posting (sink.ErrCannotCheck).
func (s *Sink) Check(ctx context.Context) error {
	if s.api == nil {
		return sink.ErrCannotCheck
	}
	if _, err := s.api.AuthTestContext(ctx); err != nil {
		return fmt.Errorf("slack auth.test: %w", err)
	}
	return nil
}
