package confschema_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/outboxd/outboxd/confschema"
)

// declaration has a key of every shape.
type declaration struct {
	Name     string            `mapstructure:"name" doc:"a value" defaultdoc:"required"`
	Wait     time.Duration     `mapstructure:"wait" doc:"a duration"`
	Count    int               `mapstructure:"count" doc:"a number"`
	On       bool              `mapstructure:"on" doc:"a switch"`
	List     []string          `mapstructure:"list" doc:"a list"`
	Nested   nested            `mapstructure:"nested"`
	Maybe    *nested           `mapstructure:"maybe"`
	Entries  map[string]entry  `mapstructure:"entries"`
	Items    []entry           `mapstructure:"items"`
	Headers  map[string]string `mapstructure:"headers" doc:"free keys"`
	Embedded `mapstructure:",squash"`
}

type nested struct {
	Depth int `mapstructure:"depth" doc:"how deep"`
}

type entry struct {
	Kind  string        `mapstructure:"kind" doc:"the kind"`
	Delay time.Duration `mapstructure:"delay" doc:"a delay"`
}

// Embedded's keys sit beside declaration's own.
type Embedded struct {
	Extra string `mapstructure:"extra" doc:"squashed in"`
}

func defaults() declaration {
	return declaration{Wait: 5 * time.Second, Count: 3, Nested: nested{Depth: 2},
		Entries: map[string]entry{"x": {Delay: time.Minute}}}
}

func problemTexts(ps []confschema.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func TestUnknownSuggestsTheNearestKey(t *testing.T) {
	t.Parallel()
	tree := map[string]any{
		"nmae":    "x",
		"nested":  map[string]any{"depht": 1},
		"entries": map[string]any{"a": map[string]any{"knd": "k"}},
		"items":   []any{map[string]any{"kind": "k"}, map[string]any{"dealy": "1s"}},
		"headers": map[string]any{"X-Anything": "v"},
		"extra":   "squashed keys are known",
		"Count":   1, // keys match in any case, as the decoder does
		"bogus":   map[string]any{"deep": map[string]any{"er": 1}},
	}
	got := problemTexts(confschema.Unknown(tree, declaration{}))
	want := []string{
		"unknown key bogus.deep.er",
		"unknown key entries.a.knd (did you mean entries.a.kind?)",
		"unknown key items[1].dealy (did you mean items[1].delay?)",
		"unknown key nested.depht (did you mean nested.depth?)",
		"unknown key nmae (did you mean name?)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Unknown:\n got %q\nwant %q", got, want)
	}
}

func TestDecodeKeepsDefaultsAndNamesEveryBadKey(t *testing.T) {
	t.Parallel()
	d := defaults()
	problems := confschema.Decode(map[string]any{
		"name":    "n",
		"wait":    "",  // empty: keeps its default
		"count":   "7", // a string, as environment overrides give
		"on":      "true",
		"list":    "a,b",
		"entries": map[string]any{"a": map[string]any{"delay": "2s"}},
		"headers": map[string]any{"Authorization": ""}, // free keys: empty is a value
	}, &d, true)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if d.Name != "n" || d.Wait != 5*time.Second || d.Count != 7 || !d.On || !slices.Equal(d.List, []string{"a", "b"}) ||
		d.Nested.Depth != 2 || d.Entries["a"].Delay != 2*time.Second || d.Entries["x"].Delay != time.Minute ||
		len(d.Headers) != 1 {
		t.Errorf("decoded %+v", d)
	}

	bad := map[string]any{
		"wait":    5, // a bare number: 5 ns is never what was meant
		"count":   "S3CRET-many",
		"on":      []any{"S3CRET"},
		"entries": map[string]any{"a": map[string]any{"delay": "S3CRET soon"}},
		"items":   []any{map[string]any{"delay": 10}},
	}
	for _, quote := range []bool{true, false} {
		d := defaults()
		got := problemTexts(confschema.Decode(bad, &d, quote))
		want := []string{
			"count: want a whole number, got a string",
			"entries.a.delay: want a duration with a unit such as 30s or 5m, got a string",
			"items[0].delay: want a duration with a unit such as 30s or 5m, got a number",
			"on: want true or false, got a list",
			"wait: want a duration with a unit such as 30s or 5m, got a number",
		}
		if quote {
			want[0] = `count: want a whole number, got "S3CRET-many"`
			want[1] = `entries.a.delay: want a duration with a unit such as 30s or 5m, got "S3CRET soon"`
			want[2] = `items[0].delay: want a duration with a unit such as 30s or 5m, got 10`
			want[4] = `wait: want a duration with a unit such as 30s or 5m, got 5`
		}
		if !slices.Equal(got, want) {
			t.Errorf("Decode(quote %v):\n got %q\nwant %q", quote, got, want)
		}
	}
}

func TestValuesRendersEveryKeyInOrder(t *testing.T) {
	t.Parallel()
	d := defaults()
	d.Items = []entry{{Kind: "k"}}
	out, err := yaml.Marshal(confschema.Values(&d))
	if err != nil {
		t.Fatal(err)
	}
	want := `name: ""
wait: 5s
count: 3
"on": false
list: []
nested:
  depth: 2
maybe: null
entries:
  x:
    kind: ""
    delay: 1m
items:
- kind: k
  delay: 0s
headers: {}
extra: ""
`
	if string(out) != want {
		t.Errorf("Values:\n%s\nwant:\n%s", out, want)
	}
}

func TestKeysDocumentsTheDeclaration(t *testing.T) {
	t.Parallel()
	var got []string
	for _, k := range confschema.Keys(defaults()) {
		got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s", k.Path, k.Type, k.Default, k.DefaultDoc, k.Doc))
	}
	want := []string{
		"name|string||required|a value",
		"wait|duration|5s||a duration",
		"count|whole number|3||a number",
		"on|true/false|false||a switch",
		"list|list of strings|||a list",
		"nested.depth|whole number|2||how deep",
		"maybe.depth|whole number|0||how deep",
		"entries.<name>.kind|string|||the kind",
		"entries.<name>.delay|duration|1m||a delay",
		"items[].kind|string|||the kind",
		"items[].delay|duration|0s||a delay",
		"headers|mapping of strings|||free keys",
		"extra|string|||squashed in",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Keys:\n got %q\nwant %q", got, want)
	}
}

func TestValueKeysFollowTheTree(t *testing.T) {
	t.Parallel()
	got := confschema.ValueKeys(map[string]any{
		"entries": map[string]any{"a": map[string]any{}},
		"items":   []any{map[string]any{}},
	}, declaration{})
	want := []string{"name", "wait", "count", "on", "list", "nested.depth", "maybe.depth",
		"entries.a.kind", "entries.a.delay", "items[0].kind", "items[0].delay", "extra"}
	if !slices.Equal(got, want) {
		t.Errorf("ValueKeys:\n got %q\nwant %q", got, want)
	}
}

func TestWalkVisitsDeclaredKeys(t *testing.T) {
	t.Parallel()
	d := defaults()
	var keys []string
	confschema.Walk(&d, func(key string, _ reflect.StructField, v reflect.Value) bool {
		keys = append(keys, key)
		if key == "count" {
			v.SetInt(9) // values are settable
		}
		return key != "nested"
	})
	want := []string{"name", "wait", "count", "on", "list", "nested", "maybe", "entries", "items", "headers", "extra"}
	if !slices.Equal(keys, want) || d.Count != 9 {
		t.Errorf("Walk visited %q, count %d", keys, d.Count)
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	keys := []string{"relay.lease", "relay.batch_size"}
	for key, want := range map[string]string{
		"relay.leese": "relay.lease", "relais.lease": "relay.lease", "relay.bach_size": "relay.batch_size", "zzzzzzzz": "",
	} {
		if got := confschema.Nearest(key, keys); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 1500 * time.Millisecond: "1.5s", 10 * time.Minute: "10m", 24 * time.Hour: "24h", 90 * time.Second: "1m30s",
	} {
		if got := confschema.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestProblemUnder(t *testing.T) {
	t.Parallel()
	p := confschema.Problem{Key: "timout", Unknown: true, Suggestion: "timeout"}.Under("sinks.hook.options")
	if got := p.String(); !strings.Contains(got, "sinks.hook.options.timout (did you mean sinks.hook.options.timeout?)") {
		t.Errorf("Under: %s", got)
	}
}

// Options are declared once, as tagged fields; decoding, the refusal of
// unknown keys and the documentation follow from the declaration.
func Example() {
	type Options struct {
		URL     string        `mapstructure:"url" defaultdoc:"required" doc:"the endpoint"`
		Timeout time.Duration `mapstructure:"timeout" doc:"bounds one request"`
	}
	o := Options{Timeout: 10 * time.Second} // the defaults
	given := map[string]any{"url": "https://example.com", "timout": "5s"}
	for _, p := range confschema.Unknown(given, o) {
		fmt.Println(p)
	}
	fmt.Println(confschema.Decode(given, &o, false), o.Timeout)
	for _, k := range confschema.Keys(Options{Timeout: 10 * time.Second}) {
		fmt.Printf("%s (%s, default %s%s): %s\n", k.Path, k.Type, k.Default, k.DefaultDoc, k.Doc)
	}
	// Output:
	// unknown key timout (did you mean timeout?)
	// [] 10s
	// url (string, default required): the endpoint
	// timeout (duration, default 10s): bounds one request
}
