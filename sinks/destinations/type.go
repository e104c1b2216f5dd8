// Package destinations defines the sink type destinations of
// plugins.yaml: a sink delivering each row to the tenant's destination
// it names. The delivery itself is package destinations' (Sink), beside
// the destinations' store, directory, fan-out and network policy; this
// package only names it for the registry and lends it the webhook sink's
// signed request and payload shape, which that package, a floor below
// the sinks, cannot import. Package sinks/builtin lists Type.
package destinations

import (
	"github.com/outboxd/outboxd/core/sink"
	dest "github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// Type is the destinations sink type, "destinations" in plugins.yaml,
// with its options (destinations.SinkOptions) and payload shape
// ([Shape]); its sinks look up the directory of destinations
// (destinations.DirectoryResource), which is how the configuration tells
// the sinks that deliver to destinations.
var Type = registry.Define("destinations", dest.SinkDescription, dest.DefaultSinkOptions(), newSink).
	WithShape(Shape()).WithResources(dest.DirectoryResource)

// newSink builds the destinations sink called name, posting as the
// webhook sink does.
func newSink(name string, o dest.SinkOptions, env sink.Env) (*dest.Sink, error) {
	return dest.NewSink(name, o, env, dest.Webhook{Post: webhook.Post, Shape: Shape()})
}

// Shape is the webhook's (a body template, else the Standard Webhooks
// envelope), for targets that name a tenant. Type declares it, so that
// routes compile without building sinks (outboxd migrate).
func Shape() sink.Shape {
	shape := webhook.Shape()
	shape.Tenants = true
	return shape
}
