package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// FallbackRefresh is how long a target fetched through the Fallback is
// reused before it is fetched again (a later apply may change it).
const FallbackRefresh = time.Minute

// Stage returns the relay stage (relay.Config.Stage) that renders the rows
// publish() created for sinks: a row with a route (sink.Delivery.Route) is
// rendered with that route's template for its sink into the sink's own
// payload, at delivery time, under the delivery's context, and the sink
// sees only the result; rows enqueued directly pass through untouched. A
// route this relay's table lacks is fetched through fallback (nil: such
// rows are dead-lettered) and rendered in the shape of the sink the table
// was compiled with.
//
// A template that fails to render is a permanent error: the row is
// dead-lettered with the template's message. The relay runs the stage
// before it asks a sink for a row's destination key, so a per-key sink
// names the destination from the rendered payload.
func (t *Table) Stage(fallback Fallback) *Stage {
	st := &Stage{sinks: make(map[string]*sinkTargets, len(t.shapes))}
	for name, shape := range t.shapes {
		ts := &sinkTargets{sink: name, shape: shape, targets: map[string]*compiled{},
			fallback: fallback, fetched: map[string]fetchedTarget{}}
		for id, tg := range t.targets {
			if id.sink == name {
				ts.targets[id.route] = tg.compiled
			}
		}
		st.sinks[name] = ts
	}
	return st
}

// Stage renders published rows; see Table.Stage.
type Stage struct {
	sinks map[string]*sinkTargets // by sink name
}

// Prepare renders d's event into its sink's payload when d was published
// (it has a route), and leaves any other row alone.
func (st *Stage) Prepare(ctx context.Context, sinkName string, d *sink.Delivery) error {
	if d.Route == "" {
		return nil
	}
	ts, ok := st.sinks[sinkName]
	if !ok {
		return sink.Permanent(fmt.Errorf("route %s: sink %s has no templates on this relay", d.Route, sinkName))
	}
	payload, err := ts.render(ctx, d)
	if err != nil {
		return err
	}
	d.Payload = payload
	return nil
}

// sinkTargets are one sink's compiled targets, by route.
type sinkTargets struct {
	sink     string
	shape    sink.Shape
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

// render renders d's event with its route's template for this sink.
func (s *sinkTargets) render(ctx context.Context, d *sink.Delivery) (json.RawMessage, error) {
	c, err := s.compiledFor(ctx, d.Route)
	if err != nil {
		return nil, err
	}
	var ev sink.Event
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
func (s *sinkTargets) compiledFor(ctx context.Context, route string) (*compiled, error) {
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
