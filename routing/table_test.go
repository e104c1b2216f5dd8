package routing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks/email"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// testSinks are one sink of each built-in type and a custom one, built
// with options that need no server (nothing here delivers).
func testSinks(t testing.TB) map[string]sink.Sink {
	t.Helper()
	sl, err := slack.Type.New("ops-slack", map[string]any{"token": "xoxb-test", "channel": "C0OPS", "api_url": "http://127.0.0.1:1/api/"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := webhook.Type.New("partner", map[string]any{"url": "http://127.0.0.1:1/hook"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	em, err := email.Type.New("finance", map[string]any{"smtp": "127.0.0.1:1", "from": "outbox@example.com", "to": []any{"finance@example.com"}, "tls": "none"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	custom := sink.Func(func(context.Context, *sink.Delivery) error { return nil })
	return map[string]sink.Sink{"ops-slack": sl, "partner": wh, "finance": em, "custom": custom}
}

// compile parses and compiles a routes block written as YAML would decode
// it, failing the test on any problem.
func compile(t testing.TB, routes map[string]any, unmatched string) *routing.Table {
	t.Helper()
	table, ps := compileProblems(t, routes, unmatched)
	if len(ps) > 0 {
		t.Fatalf("problems: %v", ps)
	}
	return table
}

func compileProblems(t testing.TB, routes map[string]any, unmatched string) (*routing.Table, []confschema.Problem) {
	t.Helper()
	cfg, ps := routing.Parse(routes, unmatched)
	if len(ps) > 0 {
		return nil, ps
	}
	return routing.Compile(cfg, testSinks(t))
}

// orders is the routes of the example: order.created to Slack as
// text, to the webhook in the envelope and to email with a subject.
func orders() map[string]any {
	return map[string]any{
		"orders": map[string]any{
			"events": []any{"order.*"},
			"to": []any{
				map[string]any{"sink": "ops-slack", "template": map[string]any{
					"text": "New order {{.data.id}}: {{json .data.total}} {{.data.currency}}"}},
				"partner",
				map[string]any{"sink": "finance", "template": map[string]any{
					"subject": "Order {{.data.id}}", "text": "Total {{.data.total}}",
					"html": "<p>Order {{.data.id}} by {{.data.customer}}</p>"}},
			},
		},
	}
}

func TestMatchFollowsPatterns(t *testing.T) {
	table := compile(t, map[string]any{
		"one":  map[string]any{"events": []any{"order.*"}, "to": []any{"partner"}},
		"any":  map[string]any{"events": []any{"order.**"}, "to": []any{"custom"}},
		"all":  map[string]any{"events": []any{"**"}, "to": []any{"custom"}, "sample": map[string]any{"type": "x"}},
		"mid":  map[string]any{"events": []any{"a.*.c", "exact.type"}, "to": []any{"partner"}},
		"deep": map[string]any{"events": []any{"a.**.c"}, "to": []any{"custom"}},
	}, "")
	for typ, want := range map[string]string{
		"order.created":    "custom custom partner", // all, any, one: by route name
		"order":            "custom custom",
		"order.created.eu": "custom custom",
		"a.b.c":            "custom custom partner",
		"a.c":              "custom custom",
		"a.b.d.c":          "custom custom",
		"exact.type":       "custom partner",
		"exact":            "custom",
	} {
		if got := strings.Join(table.Match(typ), " "); got != want {
			t.Errorf("Match(%q) = %q, want %q", typ, got, want)
		}
	}
}

// The problems of a routes block, each at its key and naming route, sink
// and the template's line where there is one.
// (Mutation: compileRoute not rendering the sample event fails this test:
// the sample's missing key and the blocks' bad JSON go unreported.)
func TestCompileReportsEveryProblemAtItsKey(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes map[string]any
		key    string
		want   string
	}{
		{"unknown sink", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{"nope"}}},
			"routes.r.to[0].sink", `no sink named "nope"`},
		{"sink twice", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{"partner", "partner"}}},
			"routes.r.to[1]", "targets sink partner twice"},
		{"bad pattern", map[string]any{"r": map[string]any{"events": []any{"a.b c"}, "to": []any{"partner"}}},
			"routes.r.events", `segment "b c"`},
		{"no events", map[string]any{"r": map[string]any{"to": []any{"partner"}}},
			"routes.r.events", "is required"},
		{"unknown key", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{"partner"}, "tos": 1}},
			"routes.r.tos", "unknown key"},
		{"unknown field", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "ops-slack", "template": map[string]any{"txt": "x"}}}}},
			"routes.r.to[0].template.txt", "not a field of this sink's payload (want one of blocks, channel, text"},
		{"slack needs text", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{"ops-slack"}}},
			"routes.r.to[0].template", "route r, sink ops-slack: this sink needs a template setting text or blocks"},
		{"parse error with line", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "ops-slack", "template": map[string]any{"text": "line one\n{{jsn .data}}"}}}}},
			"routes.r.to[0].template.text", `route r, sink ops-slack: template: text:2: function "jsn" not defined`},
		{"update_root off Slack", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "partner", "update_root": true}}}},
			"routes.r.to[0].update_root", "does not post in threads"},
		{"thread_key with a function", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "partner", "template": map[string]any{"thread_key": "{{upper .key}}"}}}}},
			"routes.r.to[0].template.thread_key", "function \"upper\" not defined"},
		{"thread_key with a pipeline", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "partner", "template": map[string]any{"thread_key": "{{.key | printf \"%s\"}}"}}}}},
			"routes.r.to[0].template.thread_key", "may hold only text, {{.type}}, {{.key}} and {{.data.path}}"},
		{"body beside a field", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "custom", "template": map[string]any{"body": "{}", "line": "x"}}}}},
			"routes.r.to[0].template", "takes no other field"},
		{"sample of another type", map[string]any{"r": map[string]any{"events": []any{"order.*"}, "to": []any{"partner"},
			"sample": map[string]any{"type": "user.created"}}},
			"routes.r.sample.type", `"user.created" does not match`},
		{"render fails on the declared sample", map[string]any{"r": map[string]any{"events": []any{"order.*"}, "to": []any{
			map[string]any{"sink": "ops-slack", "template": map[string]any{"text": "{{.data.id}}"}}},
			"sample": map[string]any{"type": "order.created", "data": map[string]any{"ID": 1}}}},
			"routes.r.to[0].template.text", `route r, sink ops-slack: rendering the sample event order.created/sample: template: text:1:7: executing "text" at <.data.id>: map has no entry for key "id"`},
		{"bad JSON from blocks", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "ops-slack", "template": map[string]any{"blocks": `[{"type": "section", "text": {{.data.title}}}]`}}}}},
			"routes.r.to[0].template.blocks", "template blocks did not produce valid JSON"},
		{"route name", map[string]any{"a/b": map[string]any{"events": []any{"a"}, "to": []any{"partner"}}},
			"routes.a/b", "a route name is"},
		{"unmatched", nil, "routes_unmatched", `want "error" or "drop", got "ignore"`},
		// Each fallback case was checked by removing its check from
		// compileFallback (or checkFallbackTargets): the case then fails.
		{"fallback without fallback_after", fallbackRoute(map[string]any{"fallback": "finance"}),
			"routes.r.to[0].fallback", "a fallback needs fallback_after"},
		{"fallback_after without fallback", fallbackRoute(map[string]any{"fallback_after": "10m"}),
			"routes.r.to[0].fallback_after", "fallback_after needs a fallback"},
		{"fallback_after not a duration", fallbackRoute(map[string]any{"fallback": "finance", "fallback_after": "soon"}),
			"routes.r.to[0].fallback_after", `want a duration (10m) or dead, got "soon"`},
		{"fallback_after zero", fallbackRoute(map[string]any{"fallback": "finance", "fallback_after": "0s"}),
			"routes.r.to[0].fallback_after", "must be above zero"},
		{"fallback to an unknown sink", fallbackRoute(map[string]any{"fallback": "nope", "fallback_after": "dead"}),
			"routes.r.to[0].fallback.sink", `no sink named "nope" is configured for the fallback`},
		{"fallback to itself", fallbackRoute(map[string]any{"fallback": "partner", "fallback_after": "dead"}),
			"routes.r.to[0].fallback.sink", "cannot fall back to its own sink"},
		{"fallback to a later target", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			map[string]any{"sink": "partner", "fallback": "custom", "fallback_after": "dead"}, "custom"}}},
			"routes.r.to[0].fallback.sink", "sink custom already receives the route's events"},
		{"fallback to an earlier target", map[string]any{"r": map[string]any{"events": []any{"a"}, "to": []any{
			"custom", map[string]any{"sink": "partner", "fallback": "custom", "fallback_after": "dead"}}}},
			"routes.r.to[1].fallback.sink", "sink custom already receives the route's events"},
		{"fallback template field", fallbackRoute(map[string]any{"fallback": map[string]any{"sink": "finance", "template": map[string]any{"subjet": "x"}},
			"fallback_after": "dead"}),
			"routes.r.to[0].fallback.template.subjet", "not a field of this sink's payload"},
		{"fallback template render", fallbackRoute(map[string]any{"fallback": map[string]any{"sink": "ops-slack", "template": map[string]any{"text": "{{.data.x.y}}"}},
			"fallback_after": "dead"}, "sample", map[string]any{"type": "a", "data": map[string]any{"x": 1}}),
			"routes.r.to[0].fallback.template", "rendering the sample event"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var unmatched string
			if c.key == "routes_unmatched" {
				unmatched = "ignore"
			}
			_, ps := compileProblems(t, c.routes, unmatched)
			for _, p := range ps {
				if p.Key == c.key && strings.Contains(p.String(), c.want) {
					return
				}
			}
			t.Errorf("problems %v, want one at %s saying %q", ps, c.key, c.want)
		})
	}
}

// A generated sample holds every .data path the templates read, so a
// correct template passes the check without a declared sample.
func TestGeneratedSampleSatisfiesTheTemplates(t *testing.T) {
	compile(t, map[string]any{"r": map[string]any{"events": []any{"incident.**"}, "to": []any{
		map[string]any{"sink": "ops-slack", "update_root": true, "template": map[string]any{
			"text":       `{{if .data.resolved}}Resolved{{else}}Open{{end}}: {{.data.service.name}} since {{time "15:04" .data.started_at}}`,
			"blocks":     `[{"type": "section", "text": {"type": "mrkdwn", "text": {{json .data.service.summary}}}}{{with .data.links}}, {{json $.data.owner}}{{end}}]`,
			"thread_key": "incident-{{.data.id}}",
		}},
	}}}, "")
}

func render(t *testing.T, table *routing.Table, sinkName string, ev sink.Event) (json.RawMessage, error) {
	t.Helper()
	// As PostgreSQL returns a row's payload: <, > and & unescaped.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	d := &sink.Delivery{ID: 1, Sink: sinkName, DedupKey: ev.Type + "/" + ev.Key + "/orders", Route: "orders", Payload: raw, CreatedAt: ev.CreatedAt}
	err := table.Stage(nil).Prepare(context.Background(), sinkName, d)
	return d.Payload, err
}

func TestRenderGivesEachSinkItsOwnPayload(t *testing.T) {
	table := compile(t, orders(), "")
	ev := sink.Event{Type: "order.created", Key: "order-42", CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 500, time.UTC),
		Data: json.RawMessage(`{"id": 42, "total": 12.50, "currency": "EUR", "customer": "<Ann & Bob>"}`)}
	for sink, want := range map[string]string{
		"ops-slack": `{"text":"New order 42: 12.50 EUR"}`,
		"partner":   `{"type":"order.created","timestamp":"2026-11-30T12:00:00.0000005Z","data":{"id":42,"total":12.50,"currency":"EUR","customer":"<Ann & Bob>"}}`,
		"finance":   `{"html":"<p>Order 42 by &lt;Ann &amp; Bob&gt;</p>","subject":"Order 42","text":"Total 12.50"}`,
	} {
		got, err := render(t, table, sink, ev)
		if err != nil || string(got) != want {
			t.Errorf("%s: %s (%v),\nwant %s", sink, got, err, want)
		}
	}
}

func TestFunctions(t *testing.T) {
	table := compile(t, map[string]any{"orders": map[string]any{"events": []any{"**"}, "to": []any{
		map[string]any{"sink": "custom", "template": map[string]any{
			"json":     `{{json .data.name}} {{json .data}}`,
			"default":  `{{get .data "assignee" | default "nobody"}} {{.data.empty | default "none"}} {{.data.name | default "x"}}`,
			"truncate": `{{truncate 5 .data.name}}|{{truncate 20 .data.name}}`,
			"time":     `{{time "2006-01-02 15:04" .created_at}} {{time "15:04:05" .data.at}}`,
			"slack":    `{{slackEscape .data.name}}`,
		}}}, "sample": map[string]any{"type": "x", "data": map[string]any{"name": "<Ann> & Bob", "empty": "", "at": "2026-01-02T03:04:05+01:00"}}}}, "")
	got, err := render(t, table, "custom", sink.Event{Type: "x", Key: "k", CreatedAt: time.Date(2026, 11, 30, 12, 7, 0, 0, time.UTC),
		Data: json.RawMessage(`{"name": "<Ann> & Bob", "empty": "", "at": "2026-01-02T03:04:05+01:00"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]string
	if err := json.Unmarshal(got, &fields); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"json":     `"<Ann> & Bob" {"at":"2026-01-02T03:04:05+01:00","empty":"","name":"<Ann> & Bob"}`,
		"default":  "nobody none <Ann> & Bob",
		"truncate": "<Ann…|<Ann> & Bob",
		"time":     "2026-11-30 12:07 02:04:05",
		"slack":    "&lt;Ann&gt; &amp; Bob",
	} {
		if fields[field] != want {
			t.Errorf("%s: %q, want %q", field, fields[field], want)
		}
	}
}

// A template that fails at delivery (a key this event lacks) is permanent:
// the row is dead-lettered with the template's message.
// (Mutation: routedSink.render not wrapping the error in sink.Permanent
// fails this test.)
func TestRenderFailureAtDeliveryIsPermanent(t *testing.T) {
	table := compile(t, orders(), "")
	_, err := render(t, table, "ops-slack", sink.Event{Type: "order.created", Key: "k", Data: json.RawMessage(`{"id": 1}`)})
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), `route orders, sink ops-slack: template: text:1:`) ||
		!strings.Contains(err.Error(), `map has no entry for key "total"`) {
		t.Fatalf("render of an event without .data.total: %v, want a permanent error naming route, sink, template and key", err)
	}
}

// A row of a route the relay does not know is rendered with the template
// the fallback finds; without one it is dead-lettered.
// (Mutation: compiledFor never asking the fallback fails this test: the
// row is dead-lettered.)
func TestUnknownRouteUsesTheFallback(t *testing.T) {
	table := compile(t, orders(), "")
	raw := json.RawMessage(`{"type": "user.created", "key": "u1", "data": {"name": "Ann"}}`)
	deliver := func(fb routing.Fallback) (string, error) {
		d := &sink.Delivery{Route: "users", Payload: raw}
		err := table.Stage(fb).Prepare(context.Background(), "custom", d)
		return string(d.Payload), err
	}
	got, err := deliver(fallbackFunc(func(route, sink string) (map[string]string, error) {
		if route != "users" || sink != "custom" {
			return nil, routing.ErrNoTarget
		}
		return map[string]string{"line": "hello {{.data.name}}"}, nil
	}))
	if err != nil || got != `{"line":"hello Ann"}` {
		t.Errorf("with a fallback: %s %v", got, err)
	}
	if _, err := deliver(nil); !sink.IsPermanent(err) {
		t.Errorf("without a fallback: %v, want permanent", err)
	}
	if _, err := deliver(fallbackFunc(func(string, string) (map[string]string, error) { return nil, errors.New("database down") })); err == nil || sink.IsPermanent(err) {
		t.Errorf("with a failing fallback: %v, want a retryable error", err)
	}
}

type fallbackFunc func(route, sink string) (map[string]string, error)

func (f fallbackFunc) Target(_ context.Context, route, sink string) (routing.StoredTarget, error) {
	tmpl, err := f(route, sink)
	return routing.StoredTarget{Template: tmpl}, err
}

// VersionTarget answers as Target: these rows name no version.
func (f fallbackFunc) VersionTarget(ctx context.Context, _ int64, route, sink string) (routing.StoredTarget, error) {
	return f.Target(ctx, route, sink)
}

// Rows enqueued directly pass through the stage; the relay still sees the
// Slack sink itself (its default rate limit, its destination keys), and
// names a published row's destination from the payload the stage
// rendered. (Mutation: Prepare rendering enqueued rows too fails this
// test: the enqueued row's payload changes.)
func TestStageRendersWhatTheSinkNamesDestinationsFrom(t *testing.T) {
	table := compile(t, map[string]any{"orders": map[string]any{"events": []any{"**"}, "to": []any{
		map[string]any{"sink": "ops-slack", "template": map[string]any{"text": "x", "channel": "#{{.data.team}}"}}}}}, "")
	sinks := testSinks(t)
	cfg, err := relay.Config{Sinks: []relay.SinkConfig{{Name: "ops-slack", Sink: sinks["ops-slack"]}}, Stage: table.Stage(nil)}.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if rl := cfg.Sinks[0].RateLimit; rl == nil || rl.Rate != slack.DefaultRate {
		t.Errorf("rate limit %+v, want Slack's default", rl)
	}
	keyer, ok := sinks["ops-slack"].(sink.RateKeyer)
	if !ok {
		t.Fatal("the Slack sink does not name destinations")
	}
	stage := table.Stage(nil)
	published := &sink.Delivery{Route: "orders", Payload: json.RawMessage(`{"type":"x","key":"k","data":{"team":"db"}}`)}
	if err := stage.Prepare(context.Background(), "ops-slack", published); err != nil {
		t.Fatal(err)
	}
	key, err := keyer.RateKey(published)
	if err != nil || key != "#db" {
		t.Errorf("RateKey of a published row: %q %v, want #db", key, err)
	}
	enqueued := &sink.Delivery{Payload: json.RawMessage(`{"text":"plain"}`)}
	if err := stage.Prepare(context.Background(), "ops-slack", enqueued); err != nil || string(enqueued.Payload) != `{"text":"plain"}` {
		t.Fatalf("an enqueued row through the stage: %s %v, want it untouched", enqueued.Payload, err)
	}
	if key, err := keyer.RateKey(enqueued); err != nil || key != "C0OPS" {
		t.Errorf("RateKey of an enqueued row: %q %v, want the sink's channel", key, err)
	}
	if _, ok := sinks["partner"].(sink.RateKeyer); ok {
		t.Error("the webhook sink claims to name destinations")
	}
}

// Each row of a batch is prepared on its own: published rows rendered, a
// row that fails to render answered with its failure, the others left
// alone. (Mutation: Prepare returning the render error as retryable
// fails this test.)
func TestStagePreparesEachRowOfABatch(t *testing.T) {
	table := compile(t, map[string]any{"orders": map[string]any{"events": []any{"**"}, "to": []any{
		map[string]any{"sink": "custom", "template": map[string]any{"line": "{{.data.n}}"}}}}}, "")
	stage := table.Stage(nil)
	ds := []*sink.Delivery{
		{Route: "orders", Payload: json.RawMessage(`{"type":"x","key":"1","data":{"n":1}}`)},
		{Route: "orders", Payload: json.RawMessage(`{"type":"x","key":"2","data":{}}`)},
		{Payload: json.RawMessage(`{"plain":true}`)},
	}
	errs := make([]error, len(ds))
	for i, d := range ds {
		errs[i] = stage.Prepare(context.Background(), "custom", d)
	}
	if errs[0] != nil || !sink.IsPermanent(errs[1]) || errs[2] != nil {
		t.Errorf("outcomes %v, want nil, permanent, nil", errs)
	}
	if got, want := []string{string(ds[0].Payload), string(ds[2].Payload)}, []string{`{"line":"1"}`, `{"plain":true}`}; !slices.Equal(got, want) {
		t.Errorf("prepared payloads %v, want %v", got, want)
	}
}

// fallbackRoute is route r: events a to partner with the target keys
// target, and then the route's keys routeKeys (name, value pairs).
func fallbackRoute(target map[string]any, routeKeys ...any) map[string]any {
	target["sink"] = "partner"
	r := map[string]any{"events": []any{"a"}, "to": []any{target}}
	for i := 0; i+1 < len(routeKeys); i += 2 {
		r[routeKeys[i].(string)] = routeKeys[i+1]
	}
	return map[string]any{"r": r}
}

// A target's fallback is rendered for its own sink with its own template,
// is not applied (publish() makes no row for it) and reaches the relay.
// Checked with the mutation: the stand-in left out of the table's targets
// (the stage answered "route r has no target ops-slack in this
// relay's configuration").
func TestFallbackRendersWithItsOwnTemplate(t *testing.T) {
	table := compile(t, fallbackRoute(map[string]any{"fallback_after": "10m",
		"fallback": map[string]any{"sink": "ops-slack", "template": map[string]any{"text": "down: {{.type}}"}}}), "")
	if got := table.Match("a"); !slices.Equal(got, []string{"partner"}) {
		t.Errorf("publish() targets %v, want only partner", got)
	}
	want := []relay.Fallback{{Route: "r", Sink: "partner", To: "ops-slack", After: 10 * time.Minute}}
	if got := table.Fallbacks(); !slices.Equal(got, want) {
		t.Errorf("Fallbacks() = %+v, want %+v", got, want)
	}
	d := &sink.Delivery{Route: "r", Payload: json.RawMessage(`{"type": "a", "key": "k", "data": {}}`)}
	if err := table.Stage(nil).Prepare(t.Context(), "ops-slack", d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(d.Payload, []byte(`down: a`)) {
		t.Errorf("stand-in payload %s, want the fallback's template", d.Payload)
	}
}
