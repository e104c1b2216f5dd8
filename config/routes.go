package config

import (
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
	return problems
}

// HasRoutes reports whether the configuration has routes.
func (c *Config) HasRoutes() bool { return len(c.Routes) > 0 }

// RouteTable is Routes and RoutesUnmatched, compiled against the built
// sinks.
func (c *Config) RouteTable() *routing.Table { return c.routes }
