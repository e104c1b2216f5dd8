package routing

import (
	"fmt"
	"maps"
	"slices"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/status"
)

// What publish() does with an event that no route matches: the values of
// plugins.yaml's routes_unmatched.
const (
	// UnmatchedError makes such a publish fail (the default): a typo in an
	// event type must not vanish silently.
	UnmatchedError = "error"
	// UnmatchedDrop makes it a no-op, counted in outbox.events.dropped.
	UnmatchedDrop = "drop"
)

// Config is a configuration's routes: plugins.yaml's routes block and its
// routes_unmatched.
type Config struct {
	Routes map[string]Route
	// Unmatched is UnmatchedError or UnmatchedDrop; "" means the first.
	Unmatched string
}

// Route sends the events whose type matches one of its patterns to every
// one of its targets. Its keys are declared here, once, for plugins.yaml
// (see package confschema): cmd's configuration holds a map of them.
type Route struct {
	Events []string `mapstructure:"events" defaultdoc:"required" doc:"the event types the route sends, or patterns: * stands for one dotted segment, ** for any number (order.*, **)"`
	To     []Target `mapstructure:"to" defaultdoc:"required" doc:"the route's targets: each a sink name, or a mapping with sink, template and update_root"`
	Sample *Sample  `mapstructure:"sample" defaultdoc:"generated" doc:"the event config check renders the route's templates with; without one, an event is generated from the patterns and the .data fields the templates read"`
}

// Target is one destination of a route: a sink, and how the event looks
// there. In plugins.yaml a target may be just the sink's name.
type Target struct {
	Sink string `mapstructure:"sink" defaultdoc:"required" doc:"a configured sink; a route names each sink once, and a target that is only a sink may be written as its name"`
	// Template maps a field of the sink's payload to a Go text/template;
	// nil sends the event in the sink type's untemplated form.
	Template map[string]string `mapstructure:"template" defaultdoc:"the sink type's untemplated form" doc:"a Go template per field of the sink's payload (slack: text, blocks, channel; email: subject, text, html, to; webhook: body; custom sinks: any, or body), and thread_key for any sink; see docs/events.md"`
	// UpdateRoot (Slack) also edits a thread's first message to show this
	// event, with chat.update.
	UpdateRoot bool `mapstructure:"update_root" doc:"for a sink that posts threads (Slack): also edit the thread's first message to show this event"`
	// Tenant names the tenant whose destinations receive the event, for a
	// sink of type destinations: one row per matching destination.
	Tenant string `mapstructure:"tenant" doc:"for a sink of type destinations: the tenant whose destinations get the event, a template of text, {{.type}}, {{.key}} and {{.data.path}} (\"{{.data.account_id}}\"); see docs/destinations.md"`
	// Digest groups the target's rows into digests (see docs/digests.md).
	Digest *Digest `mapstructure:"digest" defaultdoc:"the sink's digest, if any" doc:"deliver this route's rows of one key that arrive together as one message: window, max_messages, key and template (see docs/digests.md)"`
	// Fallback is where the target's rows go when its sink stays down
	// (FallbackAfter says how long), nil for nowhere.
	Fallback *FallbackTarget `mapstructure:"fallback" defaultdoc:"none" doc:"where the target's rows go instead when its sink stays down (see fallback_after): a configured sink, and optionally its own template; a sink name alone is the sink with its untemplated form (see docs/events.md)"`
	// FallbackAfter is a duration or FallbackOnDead.
	FallbackAfter string `mapstructure:"fallback_after" defaultdoc:"required with fallback" doc:"when a row goes to the fallback: a duration (10m) for which the sink's circuit breaker has been open, a probe having failed since the row arrived, or dead: when the row would be dead-lettered"`
}

// FallbackOnDead is the fallback_after that hands a row to its target's
// fallback when it would be dead-lettered.
const FallbackOnDead = string(status.Dead)

// FallbackTarget is a target's fallback: a sink, and how the event looks there.
// In plugins.yaml it may be just the sink's name.
type FallbackTarget struct {
	Sink string `mapstructure:"sink" defaultdoc:"required" doc:"a configured sink other than the target's, and not another target of the route"`
	// Template is as Target.Template, for the fallback's sink.
	Template map[string]string `mapstructure:"template" defaultdoc:"the sink type's untemplated form" doc:"a Go template per field of the fallback sink's payload, as a target's template"`
}

// Sample is an example event of a route.
type Sample struct {
	Type string         `mapstructure:"type" defaultdoc:"required" doc:"the sample's type, which the route's patterns must match"`
	Key  string         `mapstructure:"key" defaultdoc:"sample" doc:"the sample's key"`
	Data map[string]any `mapstructure:"data" doc:"the sample's data"`
}

// Keys of a route and of a target, as plugins.yaml spells them in the
// problems Compile reports.
const (
	keyEvents     = "events"
	keyTo         = "to"
	keySample     = "sample"
	keyTemplate   = "template"
	keyUpdateRoot = "update_root"
	keySink       = "sink"
	keyTenant     = "tenant"
	keyFallback   = "fallback"
	keyFallbackAt = "fallback_after"
)

// ExpandTargets rewrites the targets of a routes block as a YAML decoder
// yields it (a mapping of route names to routes) that are given as a bare
// sink name into the mapping they stand for, {sink: name}, and so the
// targets' fallbacks, so that the block decodes into Routes. It changes
// routes in place.
func ExpandTargets(routes map[string]any) {
	for _, r := range routes {
		route, ok := r.(map[string]any)
		if !ok {
			continue
		}
		to, ok := route[keyTo].([]any)
		if !ok {
			continue
		}
		for i, t := range to {
			if name, ok := t.(string); ok {
				to[i] = map[string]any{keySink: name}
				continue
			}
			if target, ok := t.(map[string]any); ok {
				if name, ok := target[keyFallback].(string); ok {
					target[keyFallback] = map[string]any{keySink: name}
				}
			}
		}
	}
}

// Parse decodes a routes block as a YAML decoder yields it (a mapping of
// route names to routes, targets possibly given as bare sink names), for
// programs that configure routes without plugins.yaml. Every problem is
// reported, each at its key (routes.orders.to[0].sink).
func Parse(routes map[string]any, unmatched string) (Config, []confschema.Problem) {
	ExpandTargets(routes)
	tree := map[string]any{"routes": routes}
	var decl struct {
		Routes map[string]Route `mapstructure:"routes"`
	}
	problems := confschema.Unknown(tree, &decl)
	problems = append(problems, confschema.Decode(tree, &decl, true)...)
	return Config{Routes: decl.Routes, Unmatched: unmatched}, problems
}

// problems collects the problems Compile finds.
type problems []confschema.Problem

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, confschema.Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

// addFieldErrors adds the problems of a template's fields, each at the
// template's key at, followed by the field's name.
func (ps *problems) addFieldErrors(at, routeName, sinkName string, errs []fieldError) {
	for _, fe := range errs {
		key := at
		if fe.field != "" {
			key += "." + fe.field
		}
		ps.add(key, "route %s, sink %s: %v", routeName, sinkName, fe.err)
	}
}

// sortedRoutes returns the route names of cfg, sorted.
func sortedRoutes(cfg Config) []string {
	return slices.Sorted(maps.Keys(cfg.Routes))
}
