package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
)

// TestMain registers the two types every build has, as cmd does.
func TestMain(m *testing.M) {
	registry.RegisterType(registry.Log)
	registry.RegisterType(registry.Discard)
	os.Exit(m.Run())
}

func TestBuildNamesTheSinkAndTheProblem(t *testing.T) {
	if _, err := registry.Build("nope", "alerts", nil); err == nil ||
		!strings.Contains(err.Error(), `sink "alerts": unknown type "nope"`) ||
		!strings.Contains(err.Error(), "discard, log") {
		t.Fatalf("unknown type error = %v; want the sink name and the registered types", err)
	}
	if _, err := registry.Build("log", "audit", map[string]any{"levle": "info"}); err == nil ||
		!strings.Contains(err.Error(), `sink "audit" (type log)`) || !strings.Contains(err.Error(), "levle") {
		t.Fatalf("bad option error = %v; want the sink, its type and the option", err)
	}
}

func TestBuiltinsDeliver(t *testing.T) {
	for _, typ := range []string{registry.TypeLog, registry.TypeDiscard} {
		snk, err := registry.Build(typ, "x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := snk.Deliver(context.Background(), &sink.Delivery{ID: 1, Sink: "x", Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	}
}

func TestLookupReturnsTheRegisteredType(t *testing.T) {
	typ, ok := registry.Lookup(registry.TypeLog)
	if !ok || typ.Name != registry.TypeLog || typ.Doc == "" {
		t.Fatalf("Lookup(log) = %+v, %v", typ, ok)
	}
	if _, ok := registry.Lookup("nope"); ok {
		t.Fatal("Lookup found an unregistered type")
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering a type twice must panic")
		}
	}()
	registry.Register(registry.TypeLog, func(string, map[string]any) (sink.Sink, error) { return nil, nil })
}

// A program registers a factory under a type name; configuration then
// builds named instances of it.
func Example() {
	registry.Register("shout", func(name string, options map[string]any) (sink.Sink, error) {
		prefix, ok := options["prefix"].(string)
		if !ok {
			return nil, errors.New("option prefix: want a string")
		}
		return sink.Func(func(_ context.Context, d *sink.Delivery) error {
			fmt.Printf("%s %s\n", prefix, d.Payload)
			return nil
		}), nil
	})
	snk, err := registry.Build("shout", "town-crier", map[string]any{"prefix": "HEAR YE"})
	if err != nil {
		panic(err)
	}
	_ = snk.Deliver(context.Background(), &sink.Delivery{Payload: []byte(`{"text":"hello"}`)})
	// Output: HEAR YE {"text":"hello"}
}
