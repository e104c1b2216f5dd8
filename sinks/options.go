// Package sinks holds what the concrete sinks share: option decoding, an HTTP
// client, and the mapping of HTTP responses to delivery outcomes. Each
// integration lives in its own sub-package (sinks/slack, sinks/webhook,
// sinks/email) and registers itself with the registry.
package sinks

import (
	"fmt"
	"reflect"

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
		return fmt.Errorf("options: %w", err)
	}
	return nil
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
