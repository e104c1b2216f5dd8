package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the discord sink type, "discord" in plugins.yaml, with its
// options ([Options]) and payload shape ([Shape]); package sinks/builtin
// lists it. Its sinks are *Sink.
var Type = registry.Define("discord", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a discord sink delivers to.
const Description = "Posts each message to a Discord channel or thread through a webhook"

// The default rate limit. Discord publishes no fixed numbers and tells
// clients to follow its headers; for a webhook's messages they announce
// a bucket of 5 requests per 2 seconds, and a channel takes at most 30
// webhook messages a minute. 25 a minute with a burst of 5 stays within
// both: at most 5 start in any 2 seconds and 25+5 in any minute. The
// headers correct the sink at run time (see bucket).
const (
	DefaultRate  = 25
	DefaultPer   = time.Minute
	DefaultBurst = 5
)

// maxAnswerBytes bounds how much of a successful answer the sink decodes:
// a message object with its embeds is a few KiB.
const maxAnswerBytes = 1 << 20

// Sink posts messages through one Discord webhook. [Type] builds it. It is
// safe for concurrent use.
type Sink struct {
	name     string
	cfg      config
	mentions allowedMentions
	client   *http.Client
	bucket   bucket // the execute route's, as Discord last announced it
}

var (
	_ sink.RateLimitDefaulter = (*Sink)(nil)
	_ sink.RateKeyer          = (*Sink)(nil)
	_ sink.Shaper             = (*Sink)(nil)
	_ sink.Checker            = (*Sink)(nil)
)

// newSink builds the discord sink called name from its decoded options;
// its requests are traced with env's tracer provider, their URLs without
// the path (the webhook's token) and query.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	return &Sink{
		name:     name,
		cfg:      c,
		mentions: allowedMentions{Parse: append([]string{}, c.AllowedMentions...)},
		client: netguard.NewHTTPClient(netguard.HTTPClientOptions{
			Timeout:        c.Timeout,
			AllowPrivate:   c.AllowPrivate,
			TracerProvider: env.TracerProvider,
		}),
	}, nil
}

// DefaultRateLimit is [DefaultRate] per [DefaultPer], burst
// [DefaultBurst], per webhook ([Sink.RateKey]).
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: DefaultPer, Burst: DefaultBurst, PerKey: true}
}

// RateKey is the webhook's id, the public part of its URL: Discord limits
// each webhook on its own.
func (s *Sink) RateKey(*sink.Delivery) (string, error) { return s.cfg.webhookID, nil }

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// allowedMentions is Discord's allowed_mentions object; an empty Parse
// (sent as []) lets no mention ping anyone.
type allowedMentions struct {
	Parse []string `json:"parse"`
}

// message is the JSON body of an execute (POST) or an edit (PATCH).
type message struct {
	Content         string          `json:"content,omitempty"`
	Embeds          json.RawMessage `json:"embeds,omitempty"`
	Username        string          `json:"username,omitempty"`
	AvatarURL       string          `json:"avatar_url,omitempty"`
	ThreadName      string          `json:"thread_name,omitempty"`
	AllowedMentions allowedMentions `json:"allowed_mentions"`
}

// posted is the part of Discord's message object the sink reads.
type posted struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
}

// Receipt is what a delivered row records: Discord's message id, the
// channel it is in (a thread is a channel), and the thread when it was
// posted into one. A thread's first row's receipt is the root its later
// rows post into (sink.Delivery.ThreadRoot).
type Receipt struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
	ThreadID  string `json:"thread_id,omitempty"`
}

// Deliver posts one message. See the package documentation for the
// payload, threads and the outcomes.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	p, err := parsePayload(d.Payload)
	if err != nil {
		return s.fail(d, err)
	}
	var root *Receipt
	if len(d.ThreadRoot) > 0 {
		root = &Receipt{}
		if err := json.Unmarshal(d.ThreadRoot, root); err != nil || root.ID == "" ||
			checkSnowflake(root.ID) != nil || checkSnowflake(root.ThreadID) != nil {
			return s.fail(d, sink.Permanent(errors.New("the thread's first message has no Discord receipt (id, thread_id) to post after")))
		}
	}
	threadID, threadName := s.thread(p, root)
	if p.UpdateRoot && root != nil {
		// Before the reply: an edit sets the same content each time, so a
		// retry after a failed post edits again harmlessly, while a reply
		// posted before a failed edit would be posted twice.
		if err := s.editRoot(ctx, root, p); err != nil {
			return s.fail(d, fmt.Errorf("edit the thread's first message: %w", err))
		}
	}
	if wait := s.bucket.take(time.Now()); wait > 0 {
		return s.fail(d, sink.RetryAfter(wait, errBucketEmpty))
	}
	username := p.Username
	if username == "" {
		username = s.cfg.Username
	}
	avatar := p.AvatarURL
	if avatar == "" {
		avatar = s.cfg.AvatarURL
	}
	body := message{Content: p.Content, Embeds: p.Embeds, Username: username, AvatarURL: avatar,
		ThreadName: threadName, AllowedMentions: s.mentions}
	query := url.Values{"wait": {"true"}} // Discord answers the message (its id) only when asked to wait
	if threadID != "" {
		query.Set("thread_id", threadID)
	}
	var m posted
	if err := s.call(ctx, http.MethodPost, "", query, body, &m, true); err != nil {
		return s.fail(d, fmt.Errorf("execute webhook: %w", err))
	}
	r := Receipt{ID: m.ID, ChannelID: m.ChannelID, ThreadID: threadID}
	if threadName != "" {
		r.ThreadID = m.ChannelID // the forum thread the message created
	}
	return s.fail(d, d.SetReceipt(r))
}

// thread is where a message goes: the payload's thread_id, else the
// thread of its thread's first row, else a new forum thread named by the
// payload's thread_name, else the thread_id option's thread ("" for the
// webhook's channel).
func (s *Sink) thread(p Payload, root *Receipt) (id, name string) {
	switch {
	case p.ThreadID != "":
		return p.ThreadID, ""
	case root != nil && root.ThreadID != "":
		return root.ThreadID, ""
	case p.ThreadName != "":
		return "", p.ThreadName
	}
	return s.cfg.ThreadID, ""
}

// editRoot edits the thread's first message to p's content and embeds.
func (s *Sink) editRoot(ctx context.Context, root *Receipt, p Payload) error {
	query := url.Values{}
	if root.ThreadID != "" {
		query.Set("thread_id", root.ThreadID)
	}
	edit := message{Content: p.Content, Embeds: p.Embeds, AllowedMentions: s.mentions}
	return s.call(ctx, http.MethodPatch, "/messages/"+root.ID, query, edit, nil, false)
}

// call sends one request to the webhook's URL (plus path) with in as its
// JSON body (nil: none) and decodes a successful answer into out (nil:
// discarded). execute says the request is the webhook's execute route,
// whose bucket the sink keeps. Its errors never hold the URL.
func (s *Sink) call(ctx context.Context, method, path string, query url.Values, in, out any, execute bool) error {
	u := *s.cfg.execute
	u.Path, u.RawPath, u.RawQuery = u.Path+path, "", query.Encode()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return sink.Permanent(fmt.Errorf("encode the request: %w", err))
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return errors.New("build the request") // the error would quote the URL
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return sinks.TransportError(err)
	}
	defer netguard.DiscardBody(resp.Body)
	now := time.Now()
	if execute {
		s.bucket.observe(resp.Header, now)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		err := rateLimited(resp, now)
		if wait, _ := sink.RetryAfterDelay(err); execute {
			s.bucket.set(0, now.Add(wait))
		}
		return err
	}
	if err := sinks.ClassifyResponse(resp); err != nil {
		return err
	}
	if out != nil {
		// Discord took the request: an answer it cannot decode leaves out
		// zero rather than failing a message that was posted (a retry
		// would post it again).
		_ = json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(out)
	}
	return nil
}

// Check reads the webhook (GET on its URL): Discord answers whether the
// webhook and its token exist, and nothing is posted.
func (s *Sink) Check(ctx context.Context) error {
	if err := s.call(ctx, http.MethodGet, "", nil, nil, nil, false); err != nil {
		return fmt.Errorf("discord sink %q: read the webhook: %w", s.name, err)
	}
	return nil
}

// fail prefixes a delivery error with the sink's name and the row, keeping
// its class.
func (s *Sink) fail(d *sink.Delivery, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("discord sink %q, row %d: %w", s.name, d.ID, err)
}
