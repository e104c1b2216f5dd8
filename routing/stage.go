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

// maxVersionTargets bounds the targets of other routes versions a stage
// keeps compiled (per sink): past it they are dropped and fetched again.
// Rows of older versions drain after a deploy, so a few entries per
// deploy are live at a time.
const maxVersionTargets = 1024

// Stage returns the relay stage (relay.Config.Stage) that renders the rows
// publish() created for sinks: a row with a route (sink.Delivery.Route) is
// rendered with that route's template for its sink into the sink's own
// payload, at delivery time, under the delivery's context, and the sink
// sees only the result; rows enqueued directly pass through untouched.
//
// A row renders with the target of the routes version it was published
// under (sink.Delivery.RouteVersion): the table's own compiled template
// when the version's digest is the table's Digest, else the version's
// template as fetched through fallback (versions never change, so it is
// compiled once). During a rolling deploy that changes a template, old
// and new relays therefore render every row as it was published. A row
// that names no version (published before versions were recorded) renders
// with the table's template for its route, or, when the table lacks the
// route, the one fallback finds. Without a fallback (nil) the table's own
// templates render every row they can, and rows of routes it lacks are
// dead-lettered.
//
// A template that fails to render is a permanent error: the row is
// dead-lettered with the template's message. A version the relay cannot
// render (the database is unreachable, or the version's template does not
// compile on this relay's build) is retried, never dead-lettered at once.
// The relay runs the stage before it asks a sink for a row's destination
// key, so a per-key sink names the destination from the rendered payload.
func (t *Table) Stage(fallback Fallback) *Stage {
	st := &Stage{sinks: make(map[string]*sinkTargets, len(t.shapes))}
	digest := t.Digest()
	for name, shape := range t.shapes {
		ts := &sinkTargets{sink: name, shape: shape, digest: digest, targets: map[string]*compiled{},
			fallback: fallback, fetched: map[string]fetchedTarget{}, versioned: map[versionRoute]*compiled{}, own: map[int64]bool{},
			digestTemplates: map[string]*compiled{}}
		for id, tg := range t.targets {
			if id.sink == name {
				ts.targets[id.route] = tg.compiled
				if tg.digestTemplate != nil {
					ts.digestTemplates[id.route] = tg.digestTemplate
				}
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
	sink    string
	shape   sink.Shape
	digest  string               // the configuration's routes, Table.Digest
	targets map[string]*compiled // by route, from the relay's configuration
	// digestTemplates are the targets' digest templates, by route, from
	// the relay's configuration only: rows of a route this relay does not
	// configure go out in digests joined by the sink.
	digestTemplates map[string]*compiled
	fallback        Fallback

	mu        sync.Mutex
	fetched   map[string]fetchedTarget // by route, through Fallback.Target
	versioned map[versionRoute]*compiled
	// own lists the versions whose digest is the configuration's.
	own map[int64]bool
}

// versionRoute names a route of a routes version.
type versionRoute struct {
	version int64
	route   string
}

// fetchedTarget is a target compiled from the database, and when.
type fetchedTarget struct {
	compiled *compiled
	at       time.Time
}

// render renders d's event with its route's template for this sink.
func (s *sinkTargets) render(ctx context.Context, d *sink.Delivery) (json.RawMessage, error) {
	c, err := s.compiledFor(ctx, d)
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

// compiledFor returns the template d renders with: its routes version's
// when it names one and the stage can fetch it, else the route's.
func (s *sinkTargets) compiledFor(ctx context.Context, d *sink.Delivery) (*compiled, error) {
	if d.RouteVersion != 0 && s.fallback != nil {
		return s.versionTarget(ctx, d.RouteVersion, d.Route)
	}
	return s.routeTarget(ctx, d.Route)
}

// versionTarget returns route's template for this sink under routes
// version: the configuration's when version is the configuration's
// routes, else the database's.
func (s *sinkTargets) versionTarget(ctx context.Context, version int64, route string) (*compiled, error) {
	own, haveOwn := s.targets[route]
	key := versionRoute{version, route}
	s.mu.Lock()
	mine, known := s.own[version]
	c, fetched := s.versioned[key]
	s.mu.Unlock()
	switch {
	case haveOwn && known && mine:
		return own, nil
	case fetched:
		return c, nil
	}
	st, err := s.fallback.VersionTarget(ctx, version, route, s.sink)
	switch {
	case errors.Is(err, ErrNoTarget):
		return nil, sink.Permanent(fmt.Errorf("the row names routes version %d, which has no route %s with target %s: %w", version, route, s.sink, err))
	case err != nil:
		return nil, err // the database, not the row: retried
	}
	mine = st.Digest == s.digest
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.own) >= maxVersionTargets {
		clear(s.own)
	}
	s.own[version] = mine
	if haveOwn && mine {
		return own, nil
	}
	c, errs := compile(st.Template, s.shape, st.UpdateRoot)
	if len(errs) > 0 {
		// Another relay's build may compile it: retried, not dead-lettered.
		return nil, fmt.Errorf("route %s, sink %s: the template of routes version %d does not compile on this relay: %v", route, s.sink, version, errs[0].err)
	}
	if len(s.versioned) >= maxVersionTargets {
		clear(s.versioned)
	}
	s.versioned[key] = c
	return c, nil
}

// routeTarget returns route's template for this sink: the configuration's,
// else the database's (reused for FallbackRefresh).
func (s *sinkTargets) routeTarget(ctx context.Context, route string) (*compiled, error) {
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
	st, err := s.fallback.Target(ctx, route, s.sink)
	switch {
	case errors.Is(err, ErrNoTarget):
		return nil, sink.Permanent(fmt.Errorf("route %s has no target %s in this relay's configuration nor in the routes applied to the database: %w", route, s.sink, err))
	case err != nil:
		return nil, err // the database, not the row: retried
	}
	c, errs := compile(st.Template, s.shape, st.UpdateRoot)
	if len(errs) > 0 {
		return nil, sink.Permanent(fmt.Errorf("route %s, sink %s: the applied template: %v", route, s.sink, errs[0].err))
	}
	s.mu.Lock()
	s.fetched[route] = fetchedTarget{compiled: c, at: time.Now()}
	s.mu.Unlock()
	return c, nil
}
