package confschema

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// wantDuration is what a duration key asks for.
const wantDuration = "want a duration with a unit such as 30s or 5m"

// Decode decodes tree into out, a pointer to the declaring struct holding
// the defaults, and returns a problem for every value a key cannot take,
// sorted by key. Keys that are absent or empty keep their defaults;
// undeclared keys are ignored (Unknown reports them). quoteValues lets a
// problem quote the value it refused, which helps a user find it; leave it
// false where values may be secrets nobody has declared as such (a sink's
// options).
func Decode(tree map[string]any, out any, quoteValues bool) []Problem {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result: out,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			durationHook,
			stringToNumberOrBoolHook,
			mapstructure.StringToSliceHookFunc(","),
		),
	})
	if err != nil {
		panic("confschema: " + err.Error()) // out is not a pointer: a programming error
	}
	err = dec.Decode(withoutEmpty(tree, structType(out)))
	if err == nil {
		return nil
	}
	var problems []Problem
	for _, de := range decodeErrors(err) {
		problems = append(problems, Problem{Key: keyOfField(de.Name()), Message: describe(de.Unwrap(), quoteValues)})
	}
	if len(problems) == 0 {
		problems = []Problem{{Message: describe(err, quoteValues)}}
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	return problems
}

// withoutEmpty returns a copy of tree without the empty strings given for
// declared keys, so that they keep their defaults (an unset ${VAR:-}
// expands to ""). Inside mappings whose keys the user chooses, an empty
// string is a value like any other.
func withoutEmpty(tree map[string]any, t reflect.Type) map[string]any {
	out := make(map[string]any, len(tree))
	fields := fieldsOf(t)
	for k, v := range tree {
		f, ok := lookup(fields, k)
		switch {
		case !ok:
			out[k] = v
		case v == "":
			// dropped: the key keeps its default
		default:
			out[k] = withoutEmptyBelow(f.sf.Type, v)
		}
	}
	return out
}

func withoutEmptyBelow(t reflect.Type, v any) any {
	sh, elem := shapeOf(t)
	switch sh {
	case shapeMapping:
		if m, ok := v.(map[string]any); ok {
			return withoutEmpty(m, elem)
		}
	case shapeEntries:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for name, entry := range m {
				out[name] = withoutEmptyBelow(elem, entry)
			}
			return out
		}
	case shapeItems:
		if list, ok := v.([]any); ok {
			out := make([]any, len(list))
			for i, item := range list {
				out[i] = withoutEmptyBelow(elem, item)
			}
			return out
		}
	}
	return v
}

// valueError is a value a key cannot take.
type valueError struct {
	want string
	got  any
}

func (e *valueError) Error() string { return fmt.Sprintf("%s, got %v", e.want, e.got) }

// describe says what is wrong with a value without quoting it, unless
// quote allows it.
func describe(err error, quote bool) string {
	var (
		ve *valueError
		ut *mapstructure.UnconvertibleTypeError
		pe *mapstructure.ParseError
	)
	switch {
	case errors.As(err, &ve):
		if quote {
			if s, ok := ve.got.(string); ok {
				return fmt.Sprintf("%s, got %q", ve.want, s)
			}
			return fmt.Sprintf("%s, got %v", ve.want, ve.got)
		}
		return fmt.Sprintf("%s, got %s", ve.want, kindOf(ve.got))
	case errors.As(err, &ut):
		return fmt.Sprintf("want %s, got %s", aTypeName(ut.Expected.Type()), kindOf(ut.Value))
	case errors.As(err, &pe):
		return "want " + aTypeName(pe.Expected.Type())
	case quote:
		return err.Error()
	}
	return "invalid value"
}

// aTypeName is TypeName in a sentence: "a whole number", "true or false".
func aTypeName(t reflect.Type) string {
	name := TypeName(t)
	switch {
	case name == "true/false":
		return "true or false"
	case strings.ContainsRune("aeiou", rune(name[0])):
		return "an " + name
	}
	return "a " + name
}

// kindOf names the kind of a decoded YAML value, never the value.
func kindOf(v any) string {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Invalid:
		return "nothing"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a number"
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook accepts Go duration strings only: a bare number would be
// read as nanoseconds, which is never what a YAML author meant.
func durationHook(_, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	s, ok := data.(string)
	if !ok {
		return nil, &valueError{want: wantDuration, got: data}
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return nil, &valueError{want: wantDuration, got: s}
	}
	return d, nil
}

// stringToNumberOrBoolHook converts strings, which environment overrides
// and ${VAR} expansion produce, into the numbers and booleans keys expect.
func stringToNumberOrBoolHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	s = strings.TrimSpace(s)
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, &valueError{want: "want a whole number", got: data}
		}
		return n, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, &valueError{want: "want a number", got: data}
		}
		return f, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, &valueError{want: "want true or false", got: data}
		}
		return b, nil
	}
	return data, nil
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

// fieldIndex matches the decoder's "[name]" parts of a field name.
var fieldIndex = regexp.MustCompile(`\[([^\]]*)\]`)

// keyOfField turns the decoder's field names (sinks[alerts].backoff,
// secrets[1]) into key paths (sinks.alerts.backoff, secrets[1]): a map
// entry's name joins with a dot, a list index stays in brackets.
func keyOfField(name string) string {
	return fieldIndex.ReplaceAllStringFunc(name, func(part string) string {
		inner := part[1 : len(part)-1]
		if _, err := strconv.Atoi(inner); err == nil {
			return part
		}
		return "." + inner
	})
}
