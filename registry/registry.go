// Package registry maps sink type names to factories, the way database/sql
// maps driver names to drivers: a sink type registers itself (usually from an
// init function, or from a custom build's main), and the configuration then
// builds named sink instances from options.
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

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes a sink type available under typ. It panics when typ is
// empty, the factory is nil or the type is registered twice, since each is a
// programming error in a build of outboxd.
func Register(typ string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if typ == "" || f == nil {
		panic("registry: Register needs a type name and a factory")
	}
	if _, dup := factories[typ]; dup {
		panic(fmt.Sprintf("registry: sink type %q registered twice", typ))
	}
	factories[typ] = f
}

// Types returns the registered sink type names, sorted.
func Types() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Sorted(maps.Keys(factories))
}

// Build creates the sink instance name of type typ from options.
func Build(typ, name string, options map[string]any) (core.Sink, error) {
	mu.RLock()
	f, ok := factories[typ]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("sink %q: unknown type %q (registered types: %s)", name, typ, strings.Join(Types(), ", "))
	}
	sink, err := f(name, options)
	if err != nil {
		return nil, fmt.Errorf("sink %q (type %s): %w", name, typ, err)
	}
	return sink, nil
}
