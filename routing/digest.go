package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// Digest is a digest block (docs/digests.md): a sink's, or a route
// target's, whose rows of one key that arrive within Window, or wait
// behind the destination's rate limit, go out as one delivery.
type Digest struct {
	Window      time.Duration `mapstructure:"window" doc:"how long the first row of a digest key waits for others before they go out together"`
	MaxMessages int           `mapstructure:"max_messages" defaultdoc:"50" doc:"the most rows one digest carries; a key with more goes out in several, in order"`
	Key         string        `mapstructure:"key" defaultdoc:"the rate key (Slack: the channel; other sinks: the sink)" doc:"a Go template naming a row's digest key from its event (.type, .key, .data; a row enqueued directly is .data), like {{.data.service}}"`
	// Template is a route target's only.
	Template map[string]string `mapstructure:"template" defaultdoc:"each member rendered with the target's template, joined by the sink" doc:"a route target's digest template: a Go template per field of the sink's payload, seeing .messages (the members' events, in order), like {{len .messages}} new orders{{range .messages}}..."`
}

// Keys of a digest block.
const (
	keyDigest         = "digest"
	keyDigestKey      = "key"
	keyDigestTemplate = "template"
)

// Policy is the relay's policy for d (relay.SinkConfig.Digest), its key
// template parsed; the relay fills MaxMessages' default and checks the
// ranges.
func (d Digest) Policy() (*sink.DigestPolicy, error) {
	p := &sink.DigestPolicy{Window: d.Window, MaxMessages: d.MaxMessages}
	if d.Key == "" {
		return p, nil
	}
	t, err := template.New(keyDigestKey).Option(missingKeyError).Funcs(funcs).Parse(d.Key)
	if err != nil {
		return nil, err
	}
	p.Key = func(row *sink.Delivery) (string, error) {
		data, err := keyData(row)
		if err != nil {
			return "", sink.Permanent(fmt.Errorf("digest key: %w", err))
		}
		var b strings.Builder
		if err := t.Execute(&b, data); err != nil {
			return "", sink.Permanent(fmt.Errorf("digest key: %w", err))
		}
		return b.String(), nil
	}
	return p, nil
}

// keyData is what a digest key template sees of row: its event, or, for
// a row enqueued directly, its payload as .data.
func keyData(row *sink.Delivery) (map[string]any, error) {
	ev := sink.Event{CreatedAt: row.CreatedAt}
	if row.Route == "" {
		ev.Data = row.Payload
		return templateData(ev)
	}
	// Into an empty event: decoding into Data would reuse, and overwrite,
	// the payload's own bytes (json.RawMessage appends to itself).
	if err := json.Unmarshal(row.Payload, &ev); err != nil {
		return nil, fmt.Errorf("the row's payload is not an event: %w", err)
	}
	return templateData(ev)
}

// digestData is what a digest template sees: .messages, the members'
// events as a target's template sees each.
func digestData(events []sink.Event) (map[string]any, error) {
	messages := make([]any, len(events))
	for i, ev := range events {
		data, err := templateData(ev)
		if err != nil {
			return nil, fmt.Errorf("member %d: %w", i, err)
		}
		messages[i] = data
	}
	return map[string]any{"messages": messages}, nil
}

// RouteDigests are the digest policies of the routes whose target is
// sinkName and has a digest block, by route (relay.SinkConfig.RouteDigests).
func (t *Table) RouteDigests(sinkName string) map[string]*sink.DigestPolicy {
	var out map[string]*sink.DigestPolicy
	for id, tg := range t.targets {
		if id.sink == sinkName && tg.digest != nil {
			if out == nil {
				out = map[string]*sink.DigestPolicy{}
			}
			out[id.route] = tg.digest
		}
	}
	return out
}

// PrepareDigest renders the digest template of route's target sinkName
// with the members' events, in order (relay.DigestStage); nil when the
// target has none. A template that fails to render is a permanent error.
func (st *Stage) PrepareDigest(_ context.Context, sinkName, route string, events []json.RawMessage) (json.RawMessage, error) {
	ts, ok := st.sinks[sinkName]
	if !ok {
		return nil, nil
	}
	c := ts.digestTemplates[route]
	if c == nil {
		return nil, nil
	}
	evs := make([]sink.Event, len(events))
	for i, raw := range events {
		if err := json.Unmarshal(raw, &evs[i]); err != nil {
			return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: digest member %d is not an event: %w", route, sinkName, i, err))
		}
	}
	data, err := digestData(evs)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: %w", route, sinkName, err))
	}
	payload, err := c.renderData(data)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: digest template: %w", route, sinkName, err))
	}
	return payload, nil
}

// compileDigest checks a target's digest block: its key template, and its
// digest template against the sink's shape (rendered later with the
// route's sample, see compileRoute).
func compileDigest(at, routeName string, tc Target, shape sink.Shape, tg *target, ps *problems) {
	at += "." + keyDigest
	if tc.Digest.Window < 0 {
		ps.add(at+".window", "route %s, sink %s: must not be negative, got %s", routeName, tc.Sink, tc.Digest.Window)
	}
	if tc.Digest.MaxMessages < 0 {
		ps.add(at+".max_messages", "route %s, sink %s: must not be negative, got %d", routeName, tc.Sink, tc.Digest.MaxMessages)
	}
	p, err := tc.Digest.Policy()
	if err != nil {
		ps.add(at+"."+keyDigestKey, "route %s, sink %s: %v", routeName, tc.Sink, err)
		return
	}
	tg.digest = p
	if len(tc.Digest.Template) == 0 {
		return
	}
	c, errs := compile(tc.Digest.Template, shape, false)
	ps.addFieldErrors(at+"."+keyDigestTemplate, routeName, tc.Sink, errs)
	tg.digestTemplate = c
}
