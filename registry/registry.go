// Package registry maps sink type names to their definitions, the way
// database/sql maps driver names to drivers: a program registers the sink
// types it offers, and the configuration then builds named sink instances
// from options. Each sink package defines its type once, with [Define],
// and exports it (webhook.Type, say); the outboxd binary registers the
// built-in types in one list, package sinks/builtin; a custom build
// registers its own and the built-in ones it wants before calling
// cmd.Main.
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
)

// Factory builds the sink instance called name from its options (the
// `options` block of its plugins.yaml entry) in the environment its host
// gives it. Errors should name the option at fault; Build prefixes them
// with the sink's name and type.
type Factory func(name string, options map[string]any, env sink.Env) (sink.Sink, error)

// Type is a sink type: its name in plugins.yaml, its factory and what
// documents it. [Define] makes one from an options struct and a
// constructor; every built-in type is made so.
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
	// Resources name the resources the type's sinks look up in their
	// environment (sink.Env.Resources): a host that runs such a sink
	// publishes them (see Uses).
	Resources []string
}

// WithShape returns t with shape as its sinks' payload shape (see
// Type.Shape).
func (t Type) WithShape(shape sink.Shape) Type {
	t.Shape = shape
	return t
}

// WithResources returns t with the names of the resources its sinks look
// up (see Type.Resources).
func (t Type) WithResources(names ...string) Type {
	t.Resources = append(slices.Clip(t.Resources), names...)
	return t
}

// Uses reports whether the type's sinks look up the resource called name,
// which their host must then publish.
func (t Type) Uses(name string) bool { return slices.Contains(t.Resources, name) }

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
	if err := DecodeOptions(options, o.Interface()); err != nil {
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

// Define returns the Type called name, documented by doc (one line: what
// it delivers to), of sinks whose options are the struct O. It is the one
// way to define a sink type, and its life follows the host's steps:
//
//   - decode: the registry decodes a plugins.yaml options block into a
//     copy of defaults (declared as package confschema describes,
//     `mapstructure` and `doc` tags), reporting every problem at once,
//     naming its option: an unknown one with the nearest known one, a
//     wrong type, a duration without a unit;
//   - build: build receives the decoded options and the environment the
//     host gives the sink (sink.Env), completed: what the host left zero
//     is the process's logger and OpenTelemetry's global providers, and
//     the logger names the sink. build checks what decoding cannot and
//     keeps what it needs of the environment; it must not do I/O, since
//     configuration checks build every sink;
//   - run and close: the relay delivers through the sink; whoever built it
//     closes it (io.Closer) once the relay is done with it.
//
// Because the registry knows O, `outboxd config show` prints the sink's
// effective options, `config check` suggests its option names, and
// docs/configuration.md documents them, exactly as for the built-in types.
// A sink type that declares a payload shape or uses shared resources says
// so with WithShape and WithResources.
func Define[O any, S sink.Sink](name, doc string, defaults O, build func(name string, options O, env sink.Env) (S, error)) Type {
	return Type{Name: name, Doc: doc, Options: defaults, New: func(instance string, options map[string]any, env sink.Env) (sink.Sink, error) {
		var o O
		reflect.ValueOf(&o).Elem().Set(deepCopy(reflect.ValueOf(&defaults).Elem()))
		if err := DecodeOptions(options, &o); err != nil {
			return nil, err
		}
		s, err := build(instance, o, environment(instance, env))
		if err != nil {
			return nil, err // not s: a nil *T would make a non-nil sink.Sink
		}
		return s, nil
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

// Build creates the sink instance name of type typ from options, in the
// environment env (see Define for what a zero field becomes).
func Build(typ, name string, options map[string]any, env sink.Env) (sink.Sink, error) {
	t, ok := Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("sink %q: unknown type %q (registered types: %s)", name, typ, strings.Join(Types(), ", "))
	}
	sink, err := t.New(name, options, env)
	if err != nil {
		return nil, fmt.Errorf("sink %q (type %s): %w", name, typ, err)
	}
	return sink, nil
}
