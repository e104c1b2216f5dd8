package config

import (
	"bytes"
	"encoding/json"
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
	return c.writeRedacted(w, yaml.Indent(2), yaml.IndentSequence(true))
}

// WriteRedactedJSON prints what WriteRedacted prints, as one indented
// JSON object with the keys in the same order.
func (c *Config) WriteRedactedJSON(w io.Writer) error {
	var flow bytes.Buffer
	if err := c.writeRedacted(&flow, yaml.JSON()); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, flow.Bytes(), "", "  "); err != nil {
		return fmt.Errorf("render configuration as JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err := out.WriteTo(w)
	return err
}

// writeRedacted encodes the effective, redacted configuration with the
// YAML encoder's options (yaml.JSON for JSON).
func (c *Config) writeRedacted(w io.Writer, options ...yaml.EncodeOption) error {
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
	out, err := yaml.MarshalWithOptions(secret.Redact(values), options...)
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
