package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/registry"
)

// SinkConfigs are the configured sinks, built, with their effective
// policies, in the order of their names.
func (c *Config) SinkConfigs() []relay.SinkConfig { return c.sinks }

// Secrets are the secret values found while loading; every output of the
// binary is scrubbed of them.
func (c *Config) Secrets() []string { return c.secrets }

// CheckSink reports a sink name the configuration does not know: a row for
// it would never be delivered.
func (c *Config) CheckSink(name string) error {
	if _, ok := c.Sinks[name]; ok {
		return nil
	}
	return fmt.Errorf("unknown sink %q (configured sinks: %s)", name, c.sinkList())
}

// UsesResource reports whether the type of a configured sink looks up the
// resource called name in the sinks' environment (registry.Type.Uses): the
// process that runs them must publish it.
func (c *Config) UsesResource(name string) bool {
	for _, spec := range c.Sinks {
		if t, _ := registry.Lookup(spec.Type); t.Uses(name) {
			return true
		}
	}
	return false
}

func (c *Config) sinkList() string {
	names := slices.Sorted(maps.Keys(c.Sinks))
	if len(names) == 0 {
		return "none; add one under sinks: in the configuration"
	}
	return strings.Join(names, ", ")
}

// declaredSecrets returns the values of the configuration's keys declared
// as confschema.Secret, each sink's by its type (registry.Type.Secrets);
// the options of a sink of an unknown type all count as secrets.
func (c *Config) declaredSecrets() []string {
	out := confschema.Secrets(c)
	for _, spec := range c.Sinks {
		t, _ := registry.Lookup(spec.Type) // unknown: the zero Type, every option a secret
		out = append(out, t.Secrets(spec.Options)...)
	}
	return out
}
