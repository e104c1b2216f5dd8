package cmd

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// decodeConfig decodes the expanded settings into cfg and returns one
// problem per wrongly typed key, each naming the key.
func decodeConfig(settings map[string]any, cfg *Config) []string {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result: cfg,
		// A list key overridden from the environment comes as one
		// comma-separated string.
		DecodeHook: mapstructure.ComposeDecodeHookFunc(durationHook, stringToNumberOrBoolHook, mapstructure.StringToSliceHookFunc(",")),
	})
	if err != nil {
		return []string{err.Error()}
	}
	err = dec.Decode(settings)
	if err == nil {
		return nil
	}
	var problems []string
	for _, de := range decodeErrors(err) {
		problems = append(problems, fmt.Sprintf("%s: %v", keyOfField(de.Name()), errors.Unwrap(de)))
	}
	if len(problems) == 0 {
		problems = []string{err.Error()}
	}
	slices.Sort(problems)
	return problems
}

// decodeErrors finds the innermost *mapstructure.DecodeError of each branch
// of err's tree: the ones whose name is the full key path.
func decodeErrors(err error) []*mapstructure.DecodeError {
	var found []*mapstructure.DecodeError
	var walk func(error) bool
	walk = func(err error) bool {
		inner := false
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				inner = walk(e) || inner
			}
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				inner = walk(e)
			}
		}
		if de, ok := err.(*mapstructure.DecodeError); ok && !inner {
			found = append(found, de)
			return true
		}
		return inner
	}
	walk(err)
	return found
}

// keyOfField turns mapstructure's field names (sinks[alerts].backoff) into
// configuration keys (sinks.alerts.backoff).
func keyOfField(name string) string {
	return strings.NewReplacer("[", ".", "]", "").Replace(name)
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook accepts Go duration strings only: a bare number would be
// read as nanoseconds, which is never what a YAML author meant.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	s, ok := data.(string)
	if !ok {
		return nil, fmt.Errorf("want a duration with a unit such as 30s or 5m, got %v", data)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("want a duration with a unit such as 30s or 5m, got %q", s)
	}
	return d, nil
}

// stringToNumberOrBoolHook converts strings, which environment overrides
// and ${VAR} expansion produce, into the integers and booleans keys expect.
func stringToNumberOrBoolHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want a whole number, got %q", s)
		}
		return n, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", s)
		}
		return b, nil
	}
	return data, nil
}
