// Package sinks holds what the concrete sinks share: option decoding, an HTTP
// client, the mapping of HTTP responses to delivery outcomes, and for the
// broker sinks a redialing connection, destination templates, trace
// headers and secret redaction. Each integration lives in its own
// sub-package (sinks/slack, sinks/webhook, sinks/email, sinks/nats,
// sinks/rabbitmq, sinks/kafka); the binary registers the built-in ones in
// cmd, in one place.
//
// # The shape of a sink package
//
// Every built-in sink package exports the same four things, and a new one
// (a broker sink, say) follows them:
//
//	const Type = "webhook"                  // the type name in plugins.yaml
//	type Options struct{ ... }              // its options, declared as confschema describes
//	func DefaultOptions() Options           // the options before its options block applies
//	func New(name string, options map[string]any) (sink.Sink, error)
//
// New starts from DefaultOptions, decodes the options block with
// [DecodeOptions], checks what decoding cannot, and builds the sink without
// any I/O (configuration checks build every sink). cmd registers
// registry.Type{Name: Type, New: New, Options: DefaultOptions()}, from which
// `outboxd config show` prints the effective options and
// docs/configuration.md documents them.
package sinks

import (
	"strings"

	"github.com/outboxd/outboxd/confschema"
)

// DecodeOptions decodes a sink's options map into out, a pointer to its
// options struct holding the defaults (declared as package confschema
// describes: `mapstructure:"name"` and `doc:"..."` tags). An option absent
// or empty keeps its default. Every problem is reported at once in an
// *OptionsError: an unknown option with the nearest known one as a
// suggestion (a typo must not be silently ignored), a duration without a
// unit (a bare 5 would mean 5 ns), a value of the wrong type. Problems
// never quote the value, since an option may hold a secret.
func DecodeOptions(options map[string]any, out any) error {
	problems := confschema.Unknown(options, out)
	problems = append(problems, confschema.Decode(options, out, false)...)
	if len(problems) == 0 {
		return nil
	}
	return &OptionsError{Problems: problems}
}

// OptionsError lists every problem DecodeOptions found in a sink's options,
// each naming its option by its key below the options block.
type OptionsError struct {
	Problems []confschema.Problem
}

func (e *OptionsError) Error() string {
	texts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Unknown {
			texts[i] = strings.Replace(p.String(), "unknown key", "unknown option", 1)
		} else {
			texts[i] = "option " + p.String()
		}
	}
	return strings.Join(texts, "; ")
}
