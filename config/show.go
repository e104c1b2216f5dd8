package config

import (
	"fmt"
	"io"

	"github.com/goccy/go-yaml"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
)

// WriteRedacted prints the effective configuration as YAML: every key
// declared in Config, in declaration order, with the value the process
// uses (defaults applied), every sink's options with their defaults when
// its type declares them, and every secret (declared as confschema.Secret,
// or the secret part of a URL) replaced by secret.Redacted.
//
// It is written with a YAML encoder rather than viper's writer, which would
// lower-case the names of sinks' options (header names among them).
func (c *Config) WriteRedacted(w io.Writer) error {
	values := confschema.Values(c)
	for _, item := range values {
		if item.Key != "sinks" {
			continue
		}
		for _, sink := range item.Value.(yaml.MapSlice) {
			spec := c.Sinks[sink.Key.(string)]
			fields := sink.Value.(yaml.MapSlice)
			for i := range fields {
				if fields[i].Key == sinkOptionsKey {
					fields[i].Value = effectiveOptions(spec)
				}
			}
		}
	}
	out, err := yaml.MarshalWithOptions(secret.Redact(values), yaml.Indent(2), yaml.IndentSequence(true))
	if err != nil {
		return fmt.Errorf("render configuration: %w", err)
	}
	_, err = w.Write(out)
	return err
}

// effectiveOptions returns a sink's options as its sink type runs them:
// every option its type declares, with its default unless set (its
// secrets redacted by confschema.Values); or, for a type that declares
// none, the options as given with every value redacted, since nothing says
// which are secrets.
func effectiveOptions(spec SinkSpec) any {
	t, _ := registry.Lookup(spec.Type)
	o, err := t.EffectiveOptions(spec.Options)
	switch {
	case err == nil:
		return confschema.Values(o)
	case spec.Options == nil:
		return map[string]any{}
	}
	// No declared options (or, not reached, options that do not decode:
	// loading built the sink from the same ones).
	return secret.RedactAll(spec.Options)
}
