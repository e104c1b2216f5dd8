package config

import (
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/routing"
)

// routesKey is the configuration's block of routes.
const routesKey = "routes"

// compileRoutes checks the routes against the built sinks, or under
// DatabaseOnly against their types' shapes, and compiles them: every
// template parsed and rendered with a sample event. Each problem names its
// key, the route, the sink and the template's line.
func (c *Config) compileRoutes(scope Scope) []confschema.Problem {
	rc := routing.Config{Routes: c.Routes, Unmatched: c.RoutesUnmatched}
	var problems []confschema.Problem
	if scope == DatabaseOnly {
		shapes := make(map[string]sink.Shape, len(c.sinks))
		for _, sc := range c.sinks {
			t, _ := registry.Lookup(sc.Type)
			shapes[sc.Name] = t.Shape
		}
		c.routes, problems = routing.CompileShapes(rc, shapes)
		return problems
	}
	sinks := make(map[string]sink.Sink, len(c.sinks))
	for _, sc := range c.sinks {
		sinks[sc.Name] = sc.Sink
	}
	c.routes, problems = routing.Compile(rc, sinks)
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
