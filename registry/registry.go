// Package registry maps sink type names to factories, the way database/sql
// maps driver names to drivers: a program registers the sink types it
// offers, and the configuration then builds named sink instances from
// options. The outboxd binary registers its built-in types in one place,
// package sinks/builtin; a custom build registers its own (and the built-in
// ones it wants) before calling cmd.Main.
//
// The core never imports a concrete sink; the registry is where the two meet.
package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/outboxd/outboxd/core"
)

// Factory builds the sink instance called name from its options (the
// `options` block of its plugins.yaml entry). Errors should name the option
// at fault; Build prefixes them with the sink's name and type.
type Factory func(name string, options map[string]any) (core.Sink, error)

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
	// Options, when set, is the type's options struct (a value, not a
	// pointer) holding its defaults, declared as package confschema
	// describes. `outboxd config show` then prints every option with its
	// effective value, and docs/configuration.md lists them. New must
	// decode into the same struct with the same defaults.
	Options any
}

var (
	mu    sync.RWMutex
	types = map[string]Type{}
)

// Register makes a sink type available under typ; it is RegisterType for a
// type that documents nothing.
func Register(typ string, f Factory) { RegisterType(Type{Name: typ, New: f}) }

// RegisterType makes a sink type available. It panics when the name is
// empty, the factory is nil or the type is registered twice, since each is
// a programming error in a build of outboxd.
func RegisterType(t Type) {
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
func Build(typ, name string, options map[string]any) (core.Sink, error) {
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
