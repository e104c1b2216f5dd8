package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
)

// TestMain registers the two types every build has, as cmd does.
func TestMain(m *testing.M) {
	registry.Register(registry.Log)
	registry.Register(registry.Discard)
	os.Exit(m.Run())
}

func TestBuildNamesTheSinkAndTheProblem(t *testing.T) {
	if _, err := registry.Build("nope", "alerts", nil, sink.Env{}); err == nil ||
		!strings.Contains(err.Error(), `sink "alerts": unknown type "nope"`) ||
		!strings.Contains(err.Error(), "discard, log") {
		t.Fatalf("unknown type error = %v; want the sink name and the registered types", err)
	}
	if _, err := registry.Build("log", "audit", map[string]any{"levle": "info"}, sink.Env{}); err == nil ||
		!strings.Contains(err.Error(), `sink "audit" (type log)`) || !strings.Contains(err.Error(), "levle") {
		t.Fatalf("bad option error = %v; want the sink, its type and the option", err)
	}
}

func TestBuiltinsDeliver(t *testing.T) {
	for _, typ := range []string{registry.TypeLog, registry.TypeDiscard} {
		s, err := registry.Build(typ, "x", nil, sink.Env{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Deliver(context.Background(), &sink.Delivery{ID: 1, Sink: "x", Payload: []byte(`{}`)}); err != nil {
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
	registry.Register(registry.Type{Name: registry.TypeLog, New: func(string, map[string]any, sink.Env) (sink.Sink, error) { return nil, nil }})
}

// shoutOptions are the options of the shout type of the tests.
type shoutOptions struct {
	Prefix string        `mapstructure:"prefix" doc:"What each message is prefixed with."`
	Pause  time.Duration `mapstructure:"pause" doc:"How long to wait after shouting."`
}

func shout(_ string, o shoutOptions, _ sink.Env) (sink.Sink, error) {
	if o.Prefix == "" {
		return nil, errors.New("option prefix: must not be empty")
	}
	return sink.Func(func(_ context.Context, d *sink.Delivery) error {
		fmt.Printf("%s %s\n", o.Prefix, d.Payload)
		return nil
	}), nil
}

// TestDefineDecodesAndDocumentsTheOptions checks what Define promises a
// custom sink: its options decode from their struct with the defaults
// kept, every bad option is named (an unknown one with the nearest known
// one), and the registered type documents its options. Checked with the
// mutation "Define ignores defaults and decodes into a zero O": the pause
// default was lost and the test failed.
func TestDefineDecodesAndDocumentsTheOptions(t *testing.T) {
	var got shoutOptions
	typ := registry.Define("shout-test", "Shouts", shoutOptions{Prefix: "HEY", Pause: time.Second},
		func(_ string, o shoutOptions, _ sink.Env) (sink.Sink, error) { got = o; return sink.Func(nil), nil })
	if _, err := typ.New("crier", map[string]any{"prefix": "OI"}, sink.Env{}); err != nil {
		t.Fatal(err)
	}
	if got != (shoutOptions{Prefix: "OI", Pause: time.Second}) {
		t.Fatalf("decoded options = %+v; want the prefix set and the pause default kept", got)
	}
	_, err := typ.New("crier", map[string]any{"prefx": "OI", "pause": 5}, sink.Env{})
	if err == nil || !strings.Contains(err.Error(), `prefx`) || !strings.Contains(err.Error(), "did you mean prefix") ||
		!strings.Contains(err.Error(), "pause") {
		t.Fatalf("bad options error = %v; want the unknown option with its suggestion and the unitless duration", err)
	}
	if _, documented := typ.Options.(shoutOptions); !documented {
		t.Fatalf("Options = %T; want the options struct, which config show and the docs read", typ.Options)
	}
}

// A program defines a sink type from its options struct and a constructor;
// configuration then builds named instances of it.
func Example() {
	registry.Register(registry.Define("shout", "Prints each message with a prefix",
		shoutOptions{Prefix: "HEAR YE"}, shout))
	s, err := registry.Build("shout", "town-crier", nil, sink.Env{})
	if err != nil {
		panic(err)
	}
	_ = s.Deliver(context.Background(), &sink.Delivery{Payload: []byte(`{"text":"hello"}`)})
	// Output: HEAR YE {"text":"hello"}
}

// listOptions are options with a list, a map and a pointer, the kinds a
// copy of the defaults could share with them.
type listOptions struct {
	Schemes []string          `mapstructure:"schemes" doc:"Schemes."`
	Headers map[string]string `mapstructure:"headers" doc:"Headers."`
	Limit   *int              `mapstructure:"limit" doc:"A limit."`
}

// TestDecodingLeavesTheDefaultsAlone: options that set a list, a map or a
// pointer of the defaults change that instance's options only; the next
// instance of the type, and EffectiveOptions, get the defaults as defined.
// (Mutations, each failing this test: Define decoding into `o :=
// defaults`, a plain copy, which wrote the first instance's scheme into
// the defaults' array; EffectiveOptions copying t.Options without
// deepCopy.)
func TestDecodingLeavesTheDefaultsAlone(t *testing.T) {
	ten := 10
	want := listOptions{Schemes: []string{"https", "http"}, Headers: map[string]string{"a": "1"}, Limit: &ten}
	defaults := listOptions{Schemes: []string{"https", "http"}, Headers: map[string]string{"a": "1"}, Limit: new(int)}
	*defaults.Limit = 10
	var got []listOptions
	typ := registry.Define("list-test", "Lists", defaults,
		func(_ string, o listOptions, _ sink.Env) (sink.Sink, error) {
			got = append(got, o)
			return sink.Func(nil), nil
		})
	set := map[string]any{"schemes": []any{"http"}, "headers": map[string]any{"b": "2"}, "limit": 3}
	for _, options := range []map[string]any{set, nil, set, nil} {
		if _, err := typ.New("x", options, sink.Env{}); err != nil {
			t.Fatal(err)
		}
		if _, err := typ.EffectiveOptions(options); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range []listOptions{got[1], got[3]} {
		if !reflect.DeepEqual(o, want) {
			t.Errorf("instance %d without options: %+v (limit %d), want the defaults %+v", 2*i+1, o, *o.Limit, want)
		}
	}
	if !reflect.DeepEqual(got[0].Schemes, []string{"http"}) || got[0].Headers["b"] != "2" || *got[0].Limit != 3 {
		t.Errorf("instance with options: %+v", got[0])
	}
	eff, err := typ.EffectiveOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := *eff.(*listOptions); !reflect.DeepEqual(o, want) {
		t.Errorf("EffectiveOptions without options: %+v, want the defaults %+v", o, want)
	}
}
