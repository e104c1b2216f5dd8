package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
)

// Fallback lookups.
const (
	// FallbackRefresh is how long a target fetched through the Fallback is
	// reused before it is fetched again (a later apply may change it).
	FallbackRefresh = time.Minute
	// fallbackTimeout bounds a lookup made to name a row's destination,
	// which has no context of its own.
	fallbackTimeout = 5 * time.Second
)

// Wrap returns sinks with every sink wrapped so that the rows publish()
// created for it reach it rendered: a row with a route (sink.Delivery.Route)
// is rendered with that route's template for the sink into the sink's own
// payload, at delivery time, and the sink sees only the result; rows
// enqueued directly pass through untouched. A route this relay's table
// lacks is fetched through fallback (nil: such rows are dead-lettered).
//
// A template that fails to render is a permanent error: the row is
// dead-lettered with the template's message. The wrapped sink keeps the
// inner sink's default rate limit (resolved here) and, when the inner sink
// names destinations, names them from the rendered payload.
func (t *Table) Wrap(sinks []relay.SinkConfig, fallback Fallback) []relay.SinkConfig {
	out := slices.Clone(sinks)
	for i, sc := range out {
		if sc.RateLimit == nil {
			if d, ok := sc.Sink.(sink.RateLimitDefaulter); ok {
				rl := d.DefaultRateLimit()
				out[i].RateLimit = &rl
			}
		}
		rs := &routedSink{inner: sc.Sink, sink: sc.Name, shape: shapeOf(sc.Sink), targets: map[string]*compiled{},
			fallback: fallback, fetched: map[string]fetchedTarget{}}
		for id, tg := range t.targets {
			if id.sink == sc.Name {
				rs.targets[id.route] = tg.compiled
			}
		}
		out[i].Sink = rs.withInterfacesOf(sc.Sink)
	}
	return out
}

// withInterfacesOf returns s as a sink that implements the optional
// interfaces inner does (sink.DestinationKeyer, sink.BatchSink), so that
// wrapping changes how rows look, never how the relay treats the sink.
func (s *routedSink) withInterfacesOf(inner sink.Sink) sink.Sink {
	keyer, keyed := inner.(sink.DestinationKeyer)
	batch, batches := inner.(sink.BatchSink)
	switch {
	case keyed && batches:
		return keyedBatchRoutedSink{batchRoutedSink{s, batch}, keyer}
	case keyed:
		return keyedRoutedSink{s, keyer}
	case batches:
		return batchRoutedSink{s, batch}
	}
	return s
}

// routedSink renders published rows for the sink it wraps.
type routedSink struct {
	inner    sink.Sink
	sink     string
	shape    Shape
	targets  map[string]*compiled // by route, from the relay's configuration
	fallback Fallback

	mu      sync.Mutex
	fetched map[string]fetchedTarget // by route, through fallback
}

// fetchedTarget is a target compiled from the database, and when.
type fetchedTarget struct {
	compiled *compiled
	at       time.Time
}

// Deliver renders a published row into the sink's payload and delivers it.
func (s *routedSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	if d.Route == "" {
		return s.inner.Deliver(ctx, d)
	}
	payload, err := s.render(ctx, d)
	if err != nil {
		return err
	}
	d.Payload = payload
	return s.inner.Deliver(ctx, d)
}

// render renders d's event with its route's template for this sink.
func (s *routedSink) render(ctx context.Context, d *sink.Delivery) (json.RawMessage, error) {
	c, err := s.compiledFor(ctx, d.Route)
	if err != nil {
		return nil, err
	}
	var ev Event
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: the row's payload is not an event: %w", d.Route, s.sink, err))
	}
	ev.CreatedAt = d.CreatedAt
	payload, err := c.render(ev)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: %w", d.Route, s.sink, err))
	}
	return payload, nil
}

// compiledFor returns route's template for this sink: the configuration's,
// else the database's (reused for FallbackRefresh).
func (s *routedSink) compiledFor(ctx context.Context, route string) (*compiled, error) {
	if c, ok := s.targets[route]; ok {
		return c, nil
	}
	s.mu.Lock()
	f, ok := s.fetched[route]
	s.mu.Unlock()
	if ok && time.Since(f.at) < FallbackRefresh {
		return f.compiled, nil
	}
	if s.fallback == nil {
		return nil, sink.Permanent(fmt.Errorf("route %s has no target %s in this relay's configuration", route, s.sink))
	}
	tmpl, updateRoot, err := s.fallback.Target(ctx, route, s.sink)
	switch {
	case errors.Is(err, ErrNoTarget):
		return nil, sink.Permanent(fmt.Errorf("route %s has no target %s in this relay's configuration nor in the routes applied to the database: %w", route, s.sink, err))
	case err != nil:
		return nil, err // the database, not the row: retried
	}
	c, errs := compile(tmpl, s.shape, updateRoot)
	if len(errs) > 0 {
		return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: the applied template: %v", route, s.sink, errs[0].err))
	}
	s.mu.Lock()
	s.fetched[route] = fetchedTarget{compiled: c, at: time.Now()}
	s.mu.Unlock()
	return c, nil
}

// keyedRoutedSink is a routedSink whose inner sink names destinations (for
// rate_limit.per_key).
type keyedRoutedSink struct {
	*routedSink
	keyer sink.DestinationKeyer
}

// DestinationKey names the destination of a published row from its
// rendered payload.
func (s keyedRoutedSink) DestinationKey(d *sink.Delivery) (string, error) {
	return s.destinationKey(s.keyer, d)
}

// destinationKey renders d (without changing it) and asks keyer.
func (s *routedSink) destinationKey(keyer sink.DestinationKeyer, d *sink.Delivery) (string, error) {
	if d.Route == "" {
		return keyer.DestinationKey(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fallbackTimeout)
	defer cancel()
	payload, err := s.render(ctx, d)
	if err != nil {
		return "", err
	}
	rendered := *d
	rendered.Payload = payload
	return keyer.DestinationKey(&rendered)
}

// batchRoutedSink is a routedSink whose inner sink takes batches.
type batchRoutedSink struct {
	*routedSink
	batch sink.BatchSink
}

// DeliverBatch renders the batch's published rows and hands the inner sink
// those that rendered, with the rest; a row that failed to render gets
// that failure as its outcome.
func (s batchRoutedSink) DeliverBatch(ctx context.Context, ds []*sink.Delivery) []error {
	errs := make([]error, len(ds))
	pass := make([]*sink.Delivery, 0, len(ds))
	at := make([]int, 0, len(ds))
	for i, d := range ds {
		if d.Route != "" {
			payload, err := s.render(ctx, d)
			if err != nil {
				errs[i] = err
				continue
			}
			d.Payload = payload
		}
		pass, at = append(pass, d), append(at, i)
	}
	if len(pass) > 0 {
		for j, err := range s.batch.DeliverBatch(ctx, pass) {
			errs[at[j]] = err
		}
	}
	return errs
}

// keyedBatchRoutedSink is a batchRoutedSink that names destinations too.
type keyedBatchRoutedSink struct {
	batchRoutedSink
	keyer sink.DestinationKeyer
}

// DestinationKey is keyedRoutedSink's.
func (s keyedBatchRoutedSink) DestinationKey(d *sink.Delivery) (string, error) {
	return s.destinationKey(s.keyer, d)
}

// TemplateShape is the wrapped sink's.
func (s *routedSink) TemplateShape() Shape { return s.shape }
