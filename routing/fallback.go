package routing

import (
	"fmt"
	"slices"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
)

// fallback is a target's compiled fallback: the target that stands in
// for it (rendered by the stage as the fallback sink's target of the
// route), and when.
type fallback struct {
	standIn *target
	after   time.Duration
	onDead  bool
}

// compileFallback checks and compiles tg's fallback tc.Fallback, at the
// target's key at; it needs tc.FallbackAfter, and a fallback_after needs a
// fallback. A fallback is one sink, not a chain: its own target has none.
func compileFallback(at, routeName string, tc Target, tg *target, shapes map[string]sink.Shape, earlier []*target, ps *problems) {
	switch {
	case tc.Fallback == nil && tc.FallbackAfter == "":
		return
	case tc.Fallback == nil:
		ps.add(at+"."+keyFallbackAt, "route %s, sink %s: fallback_after needs a fallback (fallback: <sink>)", routeName, tc.Sink)
		return
	case tc.FallbackAfter == "":
		ps.add(at+"."+keyFallback, "route %s, sink %s: a fallback needs fallback_after: a duration (10m) or %s", routeName, tc.Sink, FallbackOnDead)
		return
	}
	fb := &fallback{onDead: tc.FallbackAfter == FallbackOnDead}
	if !fb.onDead {
		d, err := time.ParseDuration(tc.FallbackAfter)
		switch {
		case err != nil:
			ps.add(at+"."+keyFallbackAt, "route %s, sink %s: want a duration (10m) or %s, got %q", routeName, tc.Sink, FallbackOnDead, tc.FallbackAfter)
		case d <= 0:
			ps.add(at+"."+keyFallbackAt, "route %s, sink %s: must be above zero, got %s", routeName, tc.Sink, tc.FallbackAfter)
		}
		fb.after = d
	}
	fat := at + "." + keyFallback
	name := tc.Fallback.Sink
	shape, known := shapes[name]
	switch {
	case name == "":
		ps.add(fat+"."+keySink, "route %s, sink %s: the fallback needs a sink", routeName, tc.Sink)
		return
	case !known:
		ps.add(fat+"."+keySink, "route %s, sink %s: no sink named %q is configured for the fallback", routeName, tc.Sink, name)
		return
	case name == tc.Sink:
		ps.add(fat+"."+keySink, "route %s, sink %s: a target cannot fall back to its own sink", routeName, tc.Sink)
		return
	case slices.ContainsFunc(earlier, func(e *target) bool { return e.sink == name || e.fallback != nil && e.fallback.standIn.sink == name }):
		ps.add(fat+"."+keySink, "route %s, sink %s: sink %s already receives the route's events (a target, or another target's fallback)", routeName, tc.Sink, name)
		return
	case tc.Digest != nil || tc.Tenant != "" || shape.Tenants:
		ps.add(fat, "route %s, sink %s: a target with a digest or a tenant, or a fallback of type destinations, is not supported", routeName, tc.Sink)
		return
	}
	c, errs := compile(tc.Fallback.Template, shape, false)
	ps.addFieldErrors(fat+"."+keyTemplate, routeName, name, errs)
	fb.standIn = &target{targetID: targetID{routeName, name}, position: tg.position, template: tc.Fallback.Template, compiled: c}
	tg.fallback = fb
}

// Fallbacks returns the targets' fallbacks, as the relay hands rows over
// to them (relay.Config.Fallbacks).
func (t *Table) Fallbacks() []relay.Fallback {
	var out []relay.Fallback
	for _, r := range t.routes {
		for _, tg := range r.targets {
			if fb := tg.fallback; fb != nil {
				out = append(out, relay.Fallback{Route: r.name, Sink: tg.sink, To: fb.standIn.sink, After: fb.after, OnDead: fb.onDead})
			}
		}
	}
	return out
}

// checkFallbackTargets reports a route's fallback sink that is also one of
// its later targets (compileFallback sees the earlier ones only).
func checkFallbackTargets(at, routeName string, targets []*target, ps *problems) {
	for _, tg := range targets {
		if tg.fallback == nil {
			continue
		}
		for _, other := range targets {
			if other.position > tg.position && other.sink == tg.fallback.standIn.sink {
				ps.add(fmt.Sprintf("%s.%s[%d].%s.%s", at, keyTo, tg.position, keyFallback, keySink),
					"route %s, sink %s: sink %s already receives the route's events (a target, or another target's fallback)", routeName, tg.sink, other.sink)
			}
		}
	}
}
