package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// Type is the webhook sink type, "webhook" in plugins.yaml, with its
// options ([Options]) and payload shape ([Shape]); package sinks/builtin
// lists it.
var Type = registry.Define("webhook", Description, DefaultOptions(), newSink).WithShape(Shape())

// Description says in one line what a webhook sink delivers to.
const Description = "POSTs each message to an HTTP endpoint, signed the Standard Webhooks way"

// Sink delivers messages to one webhook endpoint. It is safe for concurrent
// use.
type Sink struct {
	name    string
	url     string
	secrets []standardwebhooks.Secret
	headers http.Header
	client  *http.Client
}

// newSink builds the webhook sink called name from its decoded options;
// its requests are traced with env's tracer provider.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	c, err := o.check()
	if err != nil {
		return nil, err
	}
	return &Sink{
		name:    name,
		url:     c.url,
		secrets: c.secrets,
		headers: c.headers,
		client: netguard.NewHTTPClient(netguard.HTTPClientOptions{
			Timeout:        c.timeout,
			AllowPrivate:   c.allowPrivate,
			TracerProvider: env.TracerProvider,
		}),
	}, nil
}

// Deliver POSTs the payload, signed, and maps the response to an outcome.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	return s.post(ctx, d.DeliveryID(), d.Payload)
}

// post POSTs body, signed, under webhook-id id, and maps the response to
// an outcome.
func (s *Sink) post(ctx context.Context, id string, body []byte) error {
	return s.wrap(Post(ctx, s.client, standardwebhooks.Endpoint{URL: s.url, Secrets: s.secrets, Headers: s.headers}, id, body))
}

// Post delivers body to e through client (see [netguard.NewHTTPClient] for the
// SSRF-safe one) under webhook-id id (a delivery's or a digest's id),
// webhook-timestamp now and webhook-signature a signature per secret. It
// maps the answer to Deliver's outcomes (nil, retryable, [sink.Permanent],
// [sink.RetryAfter]); its errors never repeat the URL or a secret.
func Post(ctx context.Context, client *http.Client, e standardwebhooks.Endpoint, id string, body []byte) error {
	if err := checkID(id); err != nil {
		return sink.Permanent(err)
	}
	now := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return sinks.TransportError(err)
	}
	req.Header = e.Headers.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	standardwebhooks.SetHeaders(req.Header, e.Secrets, id, now, body)
	// Each attempt's answer is recorded for the relay (sink.RecordAnswer).
	resp, err := sinks.RecordingClient(client).Do(req)
	if err != nil {
		return sinks.TransportError(err)
	}
	defer netguard.DiscardBody(resp.Body)
	return sinks.ClassifyResponse(resp)
}

// wrap names the sink in err, keeping its class (Permanent, RetryAfter).
func (s *Sink) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("webhook %q: %w", s.name, err)
}

// checkID refuses a delivery id the receiver would not see byte for byte in
// webhook-id: header values cannot hold control characters, and HTTP
// strips spaces around them, which would break the signature.
func checkID(id string) error {
	if id == "" || !httpguts.ValidHeaderFieldValue(id) || strings.Trim(id, " \t") != id {
		return errors.New("the delivery id (sink/dedup key) cannot be sent unchanged as webhook-id (control characters, or spaces at either end)")
	}
	return nil
}

// Shape is the payload routes render for a webhook: body, a
// template producing the JSON body. Without a template a published event
// is sent in the Standard Webhooks envelope {"type", "timestamp", "data"}.
func Shape() sink.Shape {
	return sink.Shape{
		Fields:      map[string]sink.FieldKind{sink.FieldBody: sink.Body},
		Untemplated: standardWebhooksEnvelope,
	}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// standardWebhooksEnvelope wraps an event in the Standard Webhooks payload
// structure, {"type", "timestamp", "data"}: what a webhook sink delivers
// for a target without a template.
func standardWebhooksEnvelope(ev sink.Event) (json.RawMessage, error) {
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as routing renders templates: <, > and & stay themselves
	err := enc.Encode(struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{ev.Type, ev.CreatedAt.UTC().Format(time.RFC3339Nano), data})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}
