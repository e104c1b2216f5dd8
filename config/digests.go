package config

import (
	"maps"
	"slices"

	"github.com/outboxd/outboxd/confschema"
)

// checkDigests reports what core cannot say about the sinks' digest
// blocks: a key template that does not parse, and a template, which only
// a route target's digest takes (it renders a route's events).
func (c *Config) checkDigests() []confschema.Problem {
	var problems []confschema.Problem
	for _, name := range slices.Sorted(maps.Keys(c.Sinks)) {
		d := c.Sinks[name].Digest
		if d == nil {
			continue
		}
		at := "sinks." + name + ".digest"
		if _, err := d.Policy(); err != nil {
			problems = append(problems, confschema.Problem{Key: at + ".key", Message: err.Error()})
		}
		if len(d.Template) > 0 {
			problems = append(problems, confschema.Problem{Key: at + ".template",
				Message: "a digest template renders a route's events: give it on the route's target (routes.<name>.to[i].digest.template)"})
		}
	}
	return problems
}
