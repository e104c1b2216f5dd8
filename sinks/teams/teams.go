package teams

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the teams sink type, "teams" in plugins.yaml, with its options
// ([Options]) and payload shape ([Shape]); package sinks/builtin lists it.
// Its sinks are *Sink.
var Type = registry.Define("teams", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a teams sink delivers to.
const Description = "Posts each message to a Microsoft Teams channel or chat as an Adaptive Card, through a Workflows webhook"

// The sink's rate limit unless its configuration sets one: one message a
// second with a burst of three never makes more than the four requests a
// second Microsoft allows a Teams webhook, nor more than the 100 calls a
// minute its Teams connector allows the workflow's connection.
const (
	DefaultRate  = 1
	DefaultPer   = time.Second
	DefaultBurst = 3
)

// HeaderDeliveryID carries the delivery id on every request. Teams does
// not de-duplicate on it, but the workflow (triggerOutputs()['headers'])
// or a proxy in front of it can.
const HeaderDeliveryID = "Idempotency-Key"

// Sink posts messages to one Workflows webhook. It is safe for concurrent
// use.
type Sink struct {
	name   string
	url    string
	client *http.Client
}

var (
	_ sink.RateLimitDefaulter = (*Sink)(nil)
	_ sink.Shaper             = (*Sink)(nil)
)

// newSink builds the teams sink called name from its decoded options; its
// requests are traced with env's tracer provider, their URL redacted.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Sink{
		name: name,
		url:  string(o.URL),
		client: netguard.NewHTTPClient(netguard.HTTPClientOptions{
			Timeout:        o.Timeout,
			AllowPrivate:   o.AllowPrivate,
			TracerProvider: env.TracerProvider,
		}),
	}, nil
}

// DefaultRateLimit is the limit Teams' documented limits allow one
// webhook (see DefaultRate). One sink posts to one webhook, so the limit
// is the sink's as a whole.
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: DefaultPer, Burst: DefaultBurst}
}

// Deliver posts the payload as an Adaptive Card and maps the workflow's
// answer to an outcome (see the package documentation).
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	body, err := message(d.Payload)
	if err != nil {
		return s.fail(d, err)
	}
	return s.fail(d, s.post(ctx, d.DeliveryID(), body))
}

// post POSTs body to the webhook under delivery id id.
func (s *Sink) post(ctx context.Context, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return sinks.TransportError(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if httpguts.ValidHeaderFieldValue(id) {
		// An id a header cannot carry goes without: Teams ignores it anyway.
		req.Header.Set(HeaderDeliveryID, id)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return sinks.TransportError(err)
	}
	defer netguard.DiscardBody(resp.Body)
	return sinks.ClassifyResponse(resp)
}

// fail names the sink and the row in err, keeping its class.
func (s *Sink) fail(d *sink.Delivery, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("teams sink %q, row %d: %w", s.name, d.ID, err)
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }
