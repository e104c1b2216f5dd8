// Package sinks holds what the concrete sinks share: option decoding, an HTTP
// client, the mapping of HTTP responses to delivery outcomes, and for the
// broker sinks a redialing connection, destination templates, trace
// headers and secret redaction. Each integration lives in its own
// sub-package (sinks/slack, sinks/webhook, sinks/email, sinks/nats,
// sinks/rabbitmq, sinks/kafka) and registers itself with the registry.
package sinks

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// DecodeOptions decodes a sink's options map into out, a pointer to a struct
// whose fields carry `mapstructure:"name"` tags. Unknown options are errors
// that name them (a typo must not be silently ignored), durations accept Go
// syntax ("10s"), and a wrongly typed value names its option.
func DecodeOptions(options map[string]any, out any) error {
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           out,
		Metadata:         &md,
		ErrorUnused:      true,
		WeaklyTypedInput: false,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			stringToBoolHook,
		),
	})
	if err != nil {
		return fmt.Errorf("options: %w", err)
	}
	if err := dec.Decode(options); err != nil {
		return fmt.Errorf("options: %w", describeDecodeError(err))
	}
	return nil
}

// describeDecodeError rewrites the decoder's per-option errors as "option
// NAME: want TYPE, got TYPE" (joined by "; "). It never includes the
// offending value: a secret written as a number, or in the wrong place,
// must not end up in an error message, whatever the decoder library's own
// messages say. Errors that are not about one option's value (unknown
// option names) keep their text: they name keys, not values.
func describeDecodeError(err error) error {
	var problems []string
	var walk func(error)
	walk = func(err error) {
		var (
			de *mapstructure.DecodeError
			ut *mapstructure.UnconvertibleTypeError
			pe *mapstructure.ParseError
		)
		switch e := err.(type) {
		case *mapstructure.DecodeError:
			de = e
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
			return
		case interface{ Unwrap() error }:
			if errors.As(err, &de) {
				walk(e.Unwrap())
				return
			}
			problems = append(problems, err.Error())
			return
		default:
			problems = append(problems, err.Error())
			return
		}
		switch {
		case errors.As(de, &ut):
			problems = append(problems, fmt.Sprintf("option %s: want %s, got %s", de.Name(), ut.Expected.Type(), reflect.TypeOf(ut.Value)))
		case errors.As(de, &pe):
			problems = append(problems, fmt.Sprintf("option %s: not a valid %s", de.Name(), pe.Expected.Type()))
		default:
			// Unknown options come as "<struct> has invalid keys: a, b".
			if _, keys, ok := strings.Cut(de.Unwrap().Error(), "has invalid keys: "); ok {
				problems = append(problems, "unknown options: "+keys)
			} else {
				problems = append(problems, fmt.Sprintf("option %s: invalid value", de.Name()))
			}
		}
	}
	walk(err)
	return errors.New(strings.Join(problems, "; "))
}

// stringToBoolHook accepts "true"/"false" strings, which environment
// variable expansion in plugins.yaml produces.
func stringToBoolHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Bool {
		return data, nil
	}
	switch data.(string) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return data, nil
}

// Default fills an option left at zero with its default and refuses a
// negative value, naming the option (a timeout, a count).
func Default[T int | time.Duration](name string, value *T, def T) error {
	if *value < 0 {
		return fmt.Errorf("option %s: must be positive, got %v", name, *value)
	}
	if *value == 0 {
		*value = def
	}
	return nil
}
