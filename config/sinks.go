package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/core/relay"
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

func (c *Config) sinkList() string {
	names := slices.Sorted(maps.Keys(c.Sinks))
	if len(names) == 0 {
		return "none; add one under sinks: in the configuration"
	}
	return strings.Join(names, ", ")
}
