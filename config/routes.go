package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/routing"
)

// routesKey is the configuration's block of routes.
const routesKey = "routes"

// compileRoutes checks the routes against the built sinks (those that
// failed to build, and under DatabaseOnly all of them, against their
// types' shapes), and compiles them: every
// template parsed and rendered with a sample event. Each problem names its
// key, the route, the sink and the template's line.
func (c *Config) compileRoutes(scope Scope) []confschema.Problem {
	rc := routing.Config{Routes: c.Routes, Unmatched: c.RoutesUnmatched}
	var problems []confschema.Problem
	shapes := make(map[string]sink.Shape, len(c.sinks))
	for _, sc := range c.sinks {
		t, _ := registry.Lookup(sc.Type)
		shapes[sc.Name] = t.Shape
	}
	if scope == DatabaseOnly {
		c.routes, problems = routing.CompileShapes(rc, shapes)
		return problems
	}
	sinks := make(map[string]sink.Sink, len(c.sinks))
	for _, sc := range c.sinks {
		sinks[sc.Name] = sc.Sink
	}
	// A sink that failed to build still has its routes' templates checked,
	// against its type's shape.
	c.routes, problems = routing.CompileUnbuilt(rc, sinks, shapes)
	for i := range c.sinks {
		c.sinks[i].RouteDigests = c.routes.RouteDigests(c.sinks[i].Name)
	}
	return append(problems, c.checkFallbackBreakers()...)
}

// checkFallbackBreakers reports a target whose fallback_after is a
// duration while its sink's circuit breaker is off: that duration is how
// long the breaker has been open, so the fallback would never be used.
func (c *Config) checkFallbackBreakers() []confschema.Problem {
	disabled := map[string]bool{}
	for _, sc := range c.sinks {
		disabled[sc.Name] = sc.CircuitBreaker.Disabled
	}
	var problems []confschema.Problem
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		for i, tc := range c.Routes[name].To {
			if tc.Fallback != nil && tc.FallbackAfter != "" && tc.FallbackAfter != routing.FallbackOnDead && disabled[tc.Sink] {
				problems = append(problems, confschema.Problem{Key: fmt.Sprintf("%s.%s.to[%d].fallback_after", routesKey, name, i),
					Message: fmt.Sprintf("route %s, sink %s: a duration counts from the opening of the sink's circuit breaker, which is off (circuit_breaker.enabled: false); use %s, or turn the breaker on", name, tc.Sink, routing.FallbackOnDead)})
			}
		}
	}
	return problems
}

// HasRoutes reports whether the configuration has routes.
func (c *Config) HasRoutes() bool { return len(c.Routes) > 0 }

// RouteTable is Routes and RoutesUnmatched, compiled against the built
// sinks.
func (c *Config) RouteTable() *routing.Table { return c.routes }
