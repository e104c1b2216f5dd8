package confschema

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
)

// Values renders v, a declaring struct (or a pointer to one), as YAML-ready
// values in declaration order: every declared key with its value, nested
// mappings as yaml.MapSlice, entries sorted by name, durations as
// FormatDuration writes them, an unset pointer as null. `outboxd config
// show` prints it.
func Values(v any) yaml.MapSlice {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	return valuesOf(rv)
}

func valuesOf(rv reflect.Value) yaml.MapSlice {
	out := yaml.MapSlice{}
	for _, f := range fieldsOf(rv.Type()) {
		out = append(out, yaml.MapItem{Key: f.name, Value: render(rv.FieldByIndex(f.index))})
	}
	return out
}

func render(v reflect.Value) any {
	switch v.Type() {
	case durationType:
		return FormatDuration(time.Duration(v.Int()))
	case secretType:
		return Secret(v.String()).String()
	}
	sh, _ := shapeOf(v.Type())
	switch {
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return render(v.Elem())
	case sh == shapeMapping:
		return valuesOf(v)
	case sh == shapeEntries:
		out := yaml.MapSlice{}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			out = append(out, yaml.MapItem{Key: k.String(), Value: valuesOf(v.MapIndex(k))})
		}
		return out
	case v.Kind() == reflect.Slice:
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = render(v.Index(i))
		}
		return out
	case sh == shapeFreeMapping && v.IsNil():
		return map[string]any{}
	case sh == shapeFreeMapping && v.Type().Elem() == secretType:
		out := make(map[string]any, v.Len())
		for _, k := range v.MapKeys() {
			out[k.String()] = render(v.MapIndex(k))
		}
		return out
	}
	return v.Interface()
}

// FormatDuration writes d as a user would: 10m rather than 10m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Key is one declared key as the documentation lists it.
type Key struct {
	// Path is the key's path, with <name> for an entry's name and [] for
	// a list's items: sinks.<name>.backoff.initial.
	Path string
	// Type names the kind of value (TypeName).
	Type string
	// Default is the value in the defaults, as text ("" when there is
	// none).
	Default string
	// DefaultDoc, when set, describes the default in words instead (the
	// defaultdoc tag): "required", "relay.concurrency".
	DefaultDoc string
	// Doc is the key's one line of documentation.
	Doc string
}

// Keys lists every key defaults (a declaring struct, or a pointer to one,
// holding the defaults) declares, in declaration order, for the
// documentation. The defaults of a map of structs' entries are those of
// its one entry in defaults, if it has exactly one; of a list's items,
// those of its first item.
func Keys(defaults any) []Key {
	rv := reflect.ValueOf(defaults)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	return keysOf("", rv)
}

func keysOf(prefix string, rv reflect.Value) []Key {
	var out []Key
	for _, f := range fieldsOf(rv.Type()) {
		if f.remain {
			continue
		}
		path := Join(prefix, f.name)
		fv := rv.FieldByIndex(f.index)
		sh, elem := shapeOf(f.sf.Type)
		switch sh {
		case shapeMapping:
			if fv.Kind() == reflect.Pointer {
				fv = fv.Elem()
			}
			out = append(out, keysOf(path, orZero(fv, elem))...)
		case shapeEntries:
			var entry reflect.Value
			if fv.Len() == 1 {
				entry = fv.MapIndex(fv.MapKeys()[0])
			}
			out = append(out, keysOf(path+".<name>", orZero(entry, elem))...)
		case shapeItems:
			var item reflect.Value
			if fv.Len() > 0 {
				item = fv.Index(0)
			}
			out = append(out, keysOf(path+"[]", orZero(item, elem))...)
		default:
			out = append(out, Key{Path: path, Type: TypeName(f.sf.Type), Default: defaultText(fv),
				DefaultDoc: f.sf.Tag.Get(tagDefaultDoc), Doc: f.sf.Tag.Get(tagDoc)})
		}
	}
	return out
}

func orZero(v reflect.Value, t reflect.Type) reflect.Value {
	if !v.IsValid() {
		return reflect.New(t).Elem()
	}
	return v
}

// defaultText writes a default value for the documentation; "" for none.
func defaultText(v reflect.Value) string {
	if v.Type() == durationType {
		return FormatDuration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return defaultText(v.Elem())
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return ""
		}
	case reflect.String:
		return v.String()
	}
	return fmt.Sprint(v.Interface())
}

// TypeName names the kind of value a key of type t takes, as the
// documentation and error messages say it.
func TypeName(t reflect.Type) string {
	if t == durationType {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return TypeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "true/false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list of " + TypeName(t.Elem()) + "s"
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return "mapping"
		}
		return "mapping of " + TypeName(t.Elem()) + "s"
	case reflect.Struct:
		return "mapping"
	case reflect.Interface:
		// A value of any shape (an event type's example, a JSON Schema).
		return "any value"
	}
	return t.String()
}
