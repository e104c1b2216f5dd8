package mattermost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the mattermost sink type, "mattermost" in plugins.yaml, with its
// options ([Options]) and payload shape ([Shape]); package sinks/builtin
// lists it. Its sinks are *Sink.
var Type = registry.Define("mattermost", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a mattermost sink delivers to.
const Description = "Posts each message to a Mattermost channel through an incoming webhook (Slack-compatible attachments)"

// The sink's rate limit unless its configuration sets one: Mattermost's
// rate limiter, when an administrator turns it on, allows each client
// address 10 requests a second (RateLimitSettings.PerSec) with a burst of
// 100 (MaxBurst). The sink keeps to the rate with a burst of 10, leaving
// the rest of the bucket to the other sinks and clients behind the same
// address.
const (
	DefaultRate  = 10
	DefaultPer   = time.Second
	DefaultBurst = 10
)

// answerOK is the body Mattermost answers an accepted post with.
const answerOK = "ok"

// Sink posts messages to one Mattermost incoming webhook. It is safe for
// concurrent use.
type Sink struct {
	name   string
	opts   Options
	client *http.Client
}

var (
	_ sink.RateLimitDefaulter = (*Sink)(nil)
	_ sink.Shaper             = (*Sink)(nil)
)

// newSink builds the mattermost sink called name from its decoded options;
// its requests are traced with env's tracer provider, their URL redacted.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Sink{
		name: name,
		opts: o,
		client: netguard.NewHTTPClient(netguard.HTTPClientOptions{
			Timeout:        o.Timeout,
			AllowPrivate:   o.AllowPrivate,
			TracerProvider: env.TracerProvider,
		}),
	}, nil
}

// DefaultRateLimit is Mattermost's default rate limit (see DefaultRate).
// Mattermost limits by client address, not by channel, so the limit is
// the sink's as a whole (no per-key limit).
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: DefaultPer, Burst: DefaultBurst}
}

// Deliver posts the payload to the webhook and maps Mattermost's answer
// to an outcome (see the package documentation).
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	body, err := s.opts.body(d.Payload, d.DeliveryID())
	if err != nil {
		return s.fail(d, err)
	}
	return s.fail(d, s.post(ctx, body))
}

// post POSTs body to the webhook.
func (s *Sink) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, string(s.opts.URL), bytes.NewReader(body))
	if err != nil {
		return sinks.TransportError(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return sinks.TransportError(err)
	}
	defer netguard.DiscardBody(resp.Body)
	if err := sinks.ClassifyResponse(resp); err != nil {
		return err
	}
	return checkOK(resp.Body)
}

// checkOK refuses a success that is not Mattermost's "ok": the URL leads
// to something else (a proxy's or another application's page), which
// posted nothing, and retrying the same URL cannot help.
func checkOK(body io.Reader) error {
	b, _ := io.ReadAll(io.LimitReader(body, sinks.MaxBodyExcerpt))
	if string(bytes.TrimSpace(b)) == answerOK {
		return nil
	}
	return sink.Permanent(errors.New("the URL answered success without Mattermost's \"ok\" (body " + strconv.Quote(string(b)) + "): is it an incoming webhook's?"))
}

// fail names the sink and the row in err, keeping its class.
func (s *Sink) fail(d *sink.Delivery, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mattermost sink %q, row %d: %w", s.name, d.ID, err)
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }
