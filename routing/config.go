package routing

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// What publish() does with an event that no route matches: the value of
// plugins.yaml's routes_unmatched.
const (
	// UnmatchedError makes such a publish fail (the default): a typo in an
	// event type must not vanish silently.
	UnmatchedError = "error"
	// UnmatchedDrop makes it a no-op, counted in outbox.events.dropped.
	UnmatchedDrop = "drop"
)

// Config is the routes of plugins.yaml as written: its routes block and
// routes_unmatched.
type Config struct {
	Routes map[string]Route
	// Unmatched is UnmatchedError or UnmatchedDrop; "" means the first.
	Unmatched string
}

// Route sends the events whose type matches one of its patterns to every
// one of its targets.
type Route struct {
	// Events are event types or patterns: "*" stands for one dotted
	// segment, "**" for any number of them ("order.*", "**").
	Events []string
	To     []Target
	// Sample is the event `outboxd config check` renders the route's
	// templates with; nil means one generated from the patterns and the
	// fields the templates use.
	Sample *Sample
}

// Target is one destination of a route: a sink, and how the event looks
// there.
type Target struct {
	Sink string
	// Template maps a field of the sink's payload to a Go text/template
	// (see docs/events.md for each sink type's fields); nil sends the event
	// in the sink type's default shape.
	Template map[string]string
	// UpdateRoot (Slack) also edits a thread's first message to show this
	// event, with chat.update.
	UpdateRoot bool
}

// Sample is an example event of a route.
type Sample struct {
	Type string
	Key  string
	Data map[string]any
}

// Problem is one thing wrong with the routes, at a key of plugins.yaml
// ("routes.orders.to[0].template.text"), so the caller can point at the
// file's line.
type Problem struct {
	Key     string
	Message string
}

func (p Problem) String() string { return p.Key + ": " + p.Message }

// problems collects Problems.
type problems []Problem

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

// Keys of a route and of a target, as plugins.yaml spells them.
const (
	keyEvents     = "events"
	keyTo         = "to"
	keySample     = "sample"
	keySink       = "sink"
	keyTemplate   = "template"
	keyUpdateRoot = "update_root"
)

// Parse reads the routes block of plugins.yaml (a mapping of route names to
// routes, as a YAML decoder yields it) and the routes_unmatched value.
// Every problem is reported, each at its key.
func Parse(routes any, unmatched any) (Config, []Problem) {
	var ps problems
	cfg := Config{Routes: map[string]Route{}}
	switch u := unmatched.(type) {
	case nil:
	case string:
		if u != "" && u != UnmatchedError && u != UnmatchedDrop {
			ps.add("routes_unmatched", "want %q or %q, got %q", UnmatchedError, UnmatchedDrop, u)
		}
		cfg.Unmatched = u
	default:
		ps.add("routes_unmatched", "want %q or %q, got %T", UnmatchedError, UnmatchedDrop, unmatched)
	}
	if routes == nil {
		return cfg, ps
	}
	m, ok := routes.(map[string]any)
	if !ok {
		ps.add("routes", "want a mapping of route names to routes, got %T", routes)
		return cfg, ps
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if r, ok := parseRoute("routes."+name, m[name], &ps); ok {
			cfg.Routes[name] = r
		}
	}
	return cfg, ps
}

func parseRoute(at string, raw any, ps *problems) (Route, bool) {
	var r Route
	m, ok := raw.(map[string]any)
	if !ok {
		ps.add(at, "want a mapping with events and to, got %T", raw)
		return r, false
	}
	unknownKeys(at, m, ps, keyEvents, keyTo, keySample)
	r.Events = stringList(at+"."+keyEvents, m[keyEvents], ps)
	switch to := m[keyTo].(type) {
	case nil:
	case []any:
		for i, t := range to {
			if target, ok := parseTarget(fmt.Sprintf("%s.%s[%d]", at, keyTo, i), t, ps); ok {
				r.To = append(r.To, target)
			}
		}
	default:
		ps.add(at+"."+keyTo, "want a list of sink names or {sink, template} mappings, got %T", to)
	}
	if raw, ok := m[keySample]; ok {
		r.Sample = parseSample(at+"."+keySample, raw, ps)
	}
	return r, true
}

func parseTarget(at string, raw any, ps *problems) (Target, bool) {
	switch t := raw.(type) {
	case string:
		return Target{Sink: t}, true
	case map[string]any:
		unknownKeys(at, t, ps, keySink, keyTemplate, keyUpdateRoot)
		target := Target{}
		target.Sink, _ = t[keySink].(string)
		if target.Sink == "" {
			ps.add(at+"."+keySink, "is required: the name of a configured sink")
		}
		switch u := t[keyUpdateRoot].(type) {
		case nil:
		case bool:
			target.UpdateRoot = u
		default:
			ps.add(at+"."+keyUpdateRoot, "want true or false, got %T", u)
		}
		switch tmpl := t[keyTemplate].(type) {
		case nil:
		case map[string]any:
			target.Template = map[string]string{}
			for field, text := range tmpl {
				s, ok := text.(string)
				if !ok {
					ps.add(at+"."+keyTemplate+"."+field, "want a template (a string), got %T", text)
					continue
				}
				target.Template[field] = s
			}
		default:
			ps.add(at+"."+keyTemplate, "want a mapping of payload fields to templates, got %T", tmpl)
		}
		return target, true
	}
	ps.add(at, "want a sink name or a {sink, template} mapping, got %T", raw)
	return Target{}, false
}

func parseSample(at string, raw any, ps *problems) *Sample {
	m, ok := raw.(map[string]any)
	if !ok {
		ps.add(at, "want a mapping with type, key and data, got %T", raw)
		return nil
	}
	unknownKeys(at, m, ps, "type", "key", "data")
	s := &Sample{}
	s.Type, _ = m["type"].(string)
	s.Key, _ = m["key"].(string)
	switch d := m["data"].(type) {
	case nil:
	case map[string]any:
		s.Data = d
	default:
		ps.add(at+".data", "want a mapping, got %T", d)
	}
	return s
}

// stringList reads a list of strings.
func stringList(at string, raw any, ps *problems) []string {
	list, ok := raw.([]any)
	if !ok {
		if raw != nil {
			ps.add(at, "want a list, got %T", raw)
		}
		return nil
	}
	out := make([]string, 0, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			ps.add(fmt.Sprintf("%s[%d]", at, i), "want a string, got %T", v)
			continue
		}
		out = append(out, s)
	}
	return out
}

// unknownKeys reports the keys of m that are not among known.
func unknownKeys(at string, m map[string]any, ps *problems, known ...string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, k) {
			ps.add(at+"."+k, "unknown key (want one of %s)", strings.Join(known, ", "))
		}
	}
}
