package pagerduty

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
)

// Type is the pagerduty sink type, "pagerduty" in plugins.yaml, with its
// options ([Options]) and payload shape ([Shape]); package sinks/builtin
// lists it. Its sinks are *Sink.
var Type = registry.Define("pagerduty", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a pagerduty sink delivers to.
const Description = "Sends each message to PagerDuty's Events API v2 as a trigger, acknowledge or resolve, one incident per ordering key"

// PagerDuty documents a limit of 120 events per minute per routing key
// (integration key); a sink has one routing key, so the limit is the
// sink's unless its configuration sets a rate_limit.
const (
	DefaultRate  = 120
	DefaultPer   = time.Minute
	DefaultBurst = 1
)

// DefaultRetryAfter is how long a sink pauses after a 429 that names no
// Retry-After: PagerDuty's Events API answers a throttled event without
// one and asks clients to back off; a good part of the per-minute window
// lets the integration's count fall.
const DefaultRetryAfter = 30 * time.Second

// maxAnswer bounds how much of a successful answer the sink reads.
const maxAnswer = 64 << 10

// Sink sends events to one PagerDuty integration. [Type] builds it; it is
// safe for concurrent use.
type Sink struct {
	name   string
	opts   Options
	client *http.Client
}

var (
	_ sink.RateLimitDefaulter = (*Sink)(nil)
	_ sink.Shaper             = (*Sink)(nil)
)

// newSink builds the pagerduty sink called name from its decoded options;
// its requests are traced with env's tracer provider. Errors name the
// option at fault and never quote the routing key.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Sink{
		name: name,
		opts: o,
		// AllowPrivate: the events URL is the operator's own configuration,
		// not a tenant's, and proxies and tests live on private addresses.
		client: netguard.NewHTTPClient(netguard.HTTPClientOptions{Timeout: o.Timeout, AllowPrivate: true, TracerProvider: env.TracerProvider}),
	}, nil
}

// DefaultRateLimit is PagerDuty's 120 events per minute per routing key.
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: DefaultPer, Burst: DefaultBurst}
}

// Answer is PagerDuty's answer to an accepted event.
type Answer struct {
	Status   string `json:"status"`
	Message  string `json:"message"`
	DedupKey string `json:"dedup_key"`
}

// Deliver sends one event; see the package documentation for the payload,
// the dedup key and the outcomes. The receipt holds the event's action and
// the dedup_key PagerDuty answered.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	ev, err := s.event(d)
	if err != nil {
		return s.fail(d, err)
	}
	answer, err := s.send(ctx, ev)
	if err != nil {
		return s.fail(d, err)
	}
	if answer.DedupKey == "" {
		answer.DedupKey = ev.DedupKey
	}
	return d.SetReceipt(map[string]string{"event_action": ev.EventAction, "dedup_key": answer.DedupKey})
}

// send POSTs ev and maps the answer to an outcome.
func (s *Sink) send(ctx context.Context, ev Event) (Answer, error) {
	var a Answer
	body, err := json.Marshal(ev)
	if err != nil {
		return a, sink.Permanent(fmt.Errorf("encode the event: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.EventsURL, bytes.NewReader(body))
	if err != nil {
		return a, sinks.TransportError(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return a, sinks.TransportError(err)
	}
	defer netguard.DiscardBody(resp.Body)
	if err := classify(resp); err != nil {
		return a, err
	}
	// The event is accepted whatever the body says; it only names the
	// dedup key PagerDuty filed the event under, for the receipt.
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&a)
	return a, nil
}

// classify maps PagerDuty's answer as [sinks.ClassifyResponse] does (400,
// an invalid event, is permanent; 5xx retried), except that a 429 without
// Retry-After, PagerDuty's way, pauses the sink for DefaultRetryAfter.
func classify(resp *http.Response) error {
	err := sinks.ClassifyResponse(resp)
	if _, paused := sink.RetryAfterDelay(err); resp.StatusCode == http.StatusTooManyRequests && !paused {
		return sink.RetryAfter(DefaultRetryAfter, err)
	}
	return err
}

// fail names the sink and the row in err, keeping its class.
func (s *Sink) fail(d *sink.Delivery, err error) error {
	return fmt.Errorf("pagerduty sink %q, row %d: %w", s.name, d.ID, err)
}
