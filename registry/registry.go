// Package registry maps sink type names to factories, the way database/sql
// maps driver names to drivers: a program registers the sink types it
// offers, and the configuration then builds named sink instances from
// options. The outboxd binary registers its built-in types in one place,
// package sinks/builtin; a custom build registers its own (see [Define])
// and the built-in ones it wants before calling cmd.Main.
//
// The core never imports a concrete sink; the registry is where the two meet.
package registry

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/sinks"
)

// Factory builds the sink instance called name from its options (the
// `options` block of its plugins.yaml entry). Errors should name the option
// at fault; Build prefixes them with the sink's name and type.
type Factory func(name string, options map[string]any) (sink.Sink, error)

// Type is a sink type: its name in plugins.yaml, its factory and,
// optionally, what documents its options.
type Type struct {
	// Name is the value of `type:` in plugins.yaml.
	Name string
	// New builds an instance.
	New Factory
	// Doc says in one line what the type delivers to, for the
	// documentation.
	Doc string
	// Shape is the payload shape of the type's sinks when they declare
	// one (sink.Shaper; their TemplateShape must return this same shape):
	// the commands that need only the database compile routes against it
	// without building the sinks, which would need their secrets. The zero
	// Shape is that of sinks that declare none.
	Shape sink.Shape
	// Options, when set, is the type's options struct (a value, not a
	// pointer) holding its defaults, declared as package confschema
	// describes. `outboxd config show` then prints every option with its
	// effective value, and docs/configuration.md lists them. New must
	// decode into the same struct with the same defaults, which [Define]
	// guarantees. Its keys of type confschema.Secret are the type's
	// secrets (see Secrets).
	Options any
}

// errNoOptions is EffectiveOptions' error for a type that declares none.
var errNoOptions = errors.New("registry: the sink type declares no options")

// EffectiveOptions returns options, an options block of this type,
// decoded into a copy of Options: every declared option with its default
// unless set, as the type runs it (a pointer to the options struct). It
// fails for a type that declares no options and for options that do not
// decode.
func (t Type) EffectiveOptions(options map[string]any) (any, error) {
	if t.Options == nil {
		return nil, errNoOptions
	}
	o := reflect.New(reflect.TypeOf(t.Options))
	o.Elem().Set(deepCopy(reflect.ValueOf(t.Options)))
	if err := sinks.DecodeOptions(options, o.Interface()); err != nil {
		return nil, err
	}
	return o.Interface(), nil
}

// deepCopy returns a copy of v that shares no slice, map or pointer with
// it. Options are decoded into a copy of the type's defaults, and decoding
// a list writes its items into the list it finds: into a plain copy, that
// is the defaults' own array, so one sink's `schemes: [http]` made every
// later sink of its type, and every later load, default to [http http].
// Unexported fields are copied as they are.
func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := out.Field(i); f.CanSet() {
				f.Set(deepCopy(v.Field(i)))
			}
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(deepCopy(v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(deepCopy(v.Elem()))
		return out
	}
	return v
}

// Secrets returns the secret values of options, an options block of this
// type, for the binary's scrubber: the values of its keys declared as
// confschema.Secret. A type that declares no options, or options that do
// not decode, cannot say which values are secret, so every string in them
// counts as one.
func (t Type) Secrets(options map[string]any) []string {
	o, err := t.EffectiveOptions(options)
	if err != nil {
		return secret.Strings(options)
	}
	return confschema.Secrets(o)
}

var (
	mu    sync.RWMutex
	types = map[string]Type{}
)

// Define returns the Type of a sink whose options are the struct O: the
// registry decodes a plugins.yaml options block into a copy of defaults
// (declared as package confschema describes, `mapstructure` and `doc`
// tags) and hands it to build. Every problem is reported at once, naming
// its option: an unknown one with the nearest known one, a wrong type, a
// duration without a unit. Because the registry knows O, `outboxd config
// show` prints the sink's effective options, `config check` suggests its
// option names, and docs/configuration.md documents them, exactly as for
// the built-in types. build checks what decoding cannot and must not do
// I/O: configuration checks build every sink.
func Define[O any](name, doc string, defaults O, build func(name string, options O) (sink.Sink, error)) Type {
	return Type{Name: name, Doc: doc, Options: defaults, New: func(instance string, options map[string]any) (sink.Sink, error) {
		var o O
		reflect.ValueOf(&o).Elem().Set(deepCopy(reflect.ValueOf(&defaults).Elem()))
		if err := sinks.DecodeOptions(options, &o); err != nil {
			return nil, err
		}
		return build(instance, o)
	}}
}

// Register makes a sink type available. It panics when the name is empty,
// the factory is nil or the type is registered twice, since each is a
// programming error in a build of outboxd.
func Register(t Type) {
	mu.Lock()
	defer mu.Unlock()
	if t.Name == "" || t.New == nil {
		panic("registry: a sink type needs a name and a factory")
	}
	if _, dup := types[t.Name]; dup {
		panic(fmt.Sprintf("registry: sink type %q registered twice", t.Name))
	}
	types[t.Name] = t
}

// Types returns the registered sink type names, sorted.
func Types() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(types))
}

// Lookup returns the sink type registered as name.
func Lookup(name string) (Type, bool) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := types[name]
	return t, ok
}

// Build creates the sink instance name of type typ from options.
func Build(typ, name string, options map[string]any) (sink.Sink, error) {
	t, ok := Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("sink %q: unknown type %q (registered types: %s)", name, typ, strings.Join(Types(), ", "))
	}
	sink, err := t.New(name, options)
	if err != nil {
		return nil, fmt.Errorf("sink %q (type %s): %w", name, typ, err)
	}
	return sink, nil
}
