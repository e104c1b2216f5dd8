package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/builtin"
)

// problemsOf parses doc and returns its problems, failing the test unless
// it is a *Error with exit code 2.
func problemsOf(t *testing.T, doc string, env map[string]string) []string {
	t.Helper()
	_, err := Parse([]byte(doc), "p.yaml", EnvMap(env))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want a *Error (exit 2), got %v", err)
	}
	return ce.Problems
}

// TestYAMLErrorNamesLineAndColumn: a syntax error names the file, line and
// column, also after environment references earlier on the line (which
// are swapped for longer placeholders while parsing).
// (Mutation: a syntax error reported without its line fails this test.)
func TestYAMLErrorNamesLineAndColumn(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"relay: [unclosed\n":                            "p.yaml:1:8: not valid YAML",
		"http:\n  listen: x\n token: y\n":               "p.yaml:3:",
		"relay:\n  lease: 1s\n  lease: 2s\n":            "p.yaml:3:3: not valid YAML",
		"http: {token: ${T:-x}, listen: [oops}\n":       "p.yaml:1:37: not valid YAML",
		"database:\n\t- tabs are not indentation\n":     "p.yaml:2:1: not valid YAML",
		"sinks:\n  a: {type: log}\n---\nrelay: {}\n":    "p.yaml:4:",
		"- a list is not a configuration\n":             "p.yaml:1:1: want a mapping of keys",
		"relay:\n  lease: 1s\n  bach_size: ${N:-10}\n":  "p.yaml:3:3: unknown key relay.bach_size",
		"sinks: {a: {type: log, max_atempts: ${N:-3}}}": "p.yaml:1:24: unknown key sinks.a.max_atempts",
		"http: {token: ${T:-x}, listen: 5}":             "p.yaml:1:24: http.listen: want a string, got a number",
	} {
		problems := problemsOf(t, doc, nil)
		if len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
			t.Errorf("%q: problems %q, want one starting %q", doc, problems, want)
		}
	}
}

// TestEveryProblemInOneRun: a key typo, a bare number for a top-level
// duration, an unknown sink type, an unknown option, a bare number for a
// duration option, a sink named with capitals, a policy out of range and a
// missing variable, all reported at once, in the order of the file, each
// with its line.
// (Mutations: configError keeping only the first problem fails this test;
// so does the top level's decoding passing bare numbers to durations.)
func TestEveryProblemInOneRun(t *testing.T) {
	t.Parallel()
	doc := `relay:
  lese: 1s
  poll_interval: 5
sinks:
  x:
    type: pigeon
  hook:
    type: webhook
    backoff: {initial: 1m, max: 1s}
    options:
      url: https://example.com/hook
      timeout: 5
      colour: red
      secret: ${HOOK_SECRET}
  Mail:
    type: email
  chat:
    type: slack
    options: {token: xoxb-1, chanel: C1}
`
	got := problemsOf(t, doc, nil)
	want := []string{
		"p.yaml:2:3: unknown key relay.lese (did you mean relay.lease?)",
		"p.yaml:3:3: relay.poll_interval: want a duration with a unit such as 30s or 5m, got 5",
		`p.yaml:6:5: sinks.x.type: unknown sink type "pigeon" (registered types: `,
		"p.yaml:9:5: sinks.hook.backoff: want 0 < initial <= max, got 1m0s and 1s",
		"p.yaml:12:7: sinks.hook.options.timeout: want a duration with a unit such as 30s or 5m, got a number",
		"p.yaml:13:7: unknown key sinks.hook.options.colour",
		"p.yaml:14:7: sinks.hook.options.secret: environment variable HOOK_SECRET is not set",
		"p.yaml:15:3: sinks.Mail: a sink name is lower case, write mail",
		"p.yaml:19:30: unknown key sinks.chat.options.chanel (did you mean sinks.chat.options.channel?)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}
}

// TestDurationOptionsNeedAUnit: a bare number for a duration is refused in
// the options of every built-in sink type that has one, naming the key.
// (Mutation: durationHook passing a bare number through fails this test.)
func TestDurationOptionsNeedAUnit(t *testing.T) {
	t.Parallel()
	for _, name := range registry.Types() {
		typ, _ := registry.Lookup(name)
		if typ.Options == nil {
			continue
		}
		for _, k := range confschema.Keys(typ.Options) {
			if k.Type != "duration" {
				continue
			}
			doc := "sinks:\n  s:\n    type: " + name + "\n    options: {" + k.Path + ": 5}\n"
			key := "sinks.s.options." + k.Path
			if problems := problemsOf(t, doc, nil); !slices.ContainsFunc(problems, func(p string) bool {
				return strings.Contains(p, key+": want a duration with a unit")
			}) {
				t.Errorf("%s: %s: 5 accepted or not named: %q", name, k.Path, problems)
			}
		}
	}
}

// TestEnvOverrideProblemsNameTheVariable: a bad value from an OUTBOX_
// variable is reported with the variable, not a line of the file.
func TestEnvOverrideProblemsNameTheVariable(t *testing.T) {
	t.Parallel()
	problems := problemsOf(t, "relay:\n  batch_size: 5\n", map[string]string{"OUTBOX_RELAY_BATCH_SIZE": "many"})
	want := `p.yaml: relay.batch_size: want a whole number, got "many" (set by OUTBOX_RELAY_BATCH_SIZE)`
	if len(problems) != 1 || problems[0] != want {
		t.Errorf("problems %q, want %q", problems, want)
	}
}

// TestNamesKeepTheirCase: a sink name with capitals is refused with the
// spelling to use; option names (header names) reach the sink type and
// config show as written, not lower-cased.
func TestNamesKeepTheirCase(t *testing.T) {
	t.Parallel()
	problems := problemsOf(t, "sinks:\n  Mail:\n    type: log\n  Bad.Name:\n    type: log\n", nil)
	if len(problems) != 2 || !strings.Contains(problems[0], "sinks.Mail: a sink name is lower case, write mail") ||
		!strings.Contains(problems[1], "sinks.Bad.Name: a sink name is lower-case letters") {
		t.Errorf("problems %q", problems)
	}

	cfg, err := Parse([]byte(`sinks:
  hook:
    type: webhook
    options:
      url: https://example.com/hook
      headers: {X-Api-Key: k3y-value, Authorization: Bearer t0ken-value}
  free:
    type: `+anyOptionsType+`
    options: {CamelCase: {Inner-Key: v}}
`), "c.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(cfg.Sinks["free"].Options)); !slices.Equal(got, []string{"CamelCase"}) {
		t.Errorf("options reach the sink as %q", got)
	}
	var out strings.Builder
	if err := cfg.WriteRedacted(&out); err != nil {
		t.Fatal(err)
	}
	for _, kept := range []string{"X-Api-Key: " + `"` + secret.Redacted, "Authorization: " + `"` + secret.Redacted, "CamelCase:", "Inner-Key: " + `"` + secret.Redacted} {
		if !strings.Contains(out.String(), kept) {
			t.Errorf("config show lacks %q:\n%s", kept, out.String())
		}
	}
}

// TestSecretsInHeadersAndURLsAreRedacted: header values, a URL's user
// info, query tokens and the secret path of an incoming-webhook URL are
// neither shown by config show nor left in messages by the scrubber.
// (Mutation: the webhook sink's headers declared map[string]string, not
// map[string]confschema.Secret, fails this test.)
func TestSecretsInHeadersAndURLsAreRedacted(t *testing.T) {
	t.Parallel()
	secrets := []string{"hdr-auth-5ecret", "hdr-key-5ecret", "url-pass-5ecret", "urlTokenAsUser5ecret",
		"query-5ecret", "SLACKPATH5ecret0123456789", "DISCORD5ecretToken"}
	cfg, err := Parse([]byte(`sinks:
  hook:
    type: webhook
    options:
      url: https://ops:url-pass-5ecret@example.com/hook?access_token=query-5ecret&v=2
      headers: {Authorization: Bearer hdr-auth-5ecret, x-api-key: hdr-key-5ecret}
  slackish:
    type: webhook
    options: {url: "https://hooks.example.com/services/T0123/B0123/SLACKPATH5ecret0123456789"}
  discordish:
    type: webhook
    options: {url: "https://discord.example/api/webhooks/123/DISCORD5ecretToken"}
  tokenuser:
    type: webhook
    options: {url: "https://urlTokenAsUser5ecret@example.com/hook"}
`), "s.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := cfg.WriteRedacted(&out); err != nil {
		t.Fatal(err)
	}
	scrub := secret.NewScrubber(cfg.secrets...)
	for _, s := range secrets {
		if strings.Contains(out.String(), s) {
			t.Errorf("config show prints %q:\n%s", s, out.String())
		}
		if got := scrub.String("failed with " + s + "!"); got != "failed with "+secret.Redacted+"!" {
			t.Errorf("scrubber left %q as %q", s, got)
		}
	}
	for _, kept := range []string{"https://ops:" + secret.Redacted + "@example.com/hook?", "/services/T0123/B0123/" + secret.Redacted,
		"/api/webhooks/123/" + secret.Redacted, "https://" + secret.Redacted + "@example.com/hook"} {
		if !strings.Contains(out.String(), kept) {
			t.Errorf("config show lacks %q:\n%s", kept, out.String())
		}
	}
}

// TestConfigShowPrintsEveryKey: config show prints every key the
// configuration and the sink types declare, none missing and none extra.
func TestConfigShowPrintsEveryKey(t *testing.T) {
	t.Parallel()
	// The trusted proxy and the destinations' network are shown when set;
	// the tokens are a list, shown as one value.
	doc := "http:\n  trusted_proxy: {user_header: X-User, default_role: read, sources: [10.0.0.0/8]}\n" +
		"destinations:\n  network: {allow: [10.0.0.0/8]}\nsinks:\n"
	want := map[string]bool{}
	for _, k := range confschema.Keys(Config{}) {
		if !strings.HasPrefix(k.Path, "sinks.") && !strings.HasPrefix(k.Path, "routes.") {
			list, _, _ := strings.Cut(k.Path, "[]")
			want[list] = true
		}
	}
	// A route with every key; its targets are a list, shown as one value.
	for _, k := range []string{"routes.r.events", "routes.r.to", "routes.r.sample.type", "routes.r.sample.key", "routes.r.sample.data.x"} {
		want[k] = true
	}
	options := map[string]string{
		"slack": "{token: xoxb-1}", "webhook": "{url: 'https://example.com'}", "pagerduty": "{routing_key: R0123456789ABCDEF0123456789ABCDE}",
		"email": "{smtp: 'm:25', from: a@example.com}", "log": "{}", "discard": "{}",
		"nats": "{url: 'nats://h:4222', subject: s}", "destinations": "{}", "rabbitmq": "{url: 'amqp://h'}", "kafka": "{brokers: ['h:9092'], topic: t}",
		"redis": "{url: 'redis://h:6379', stream: s}",
		"mqtt":  "{url: 'tcp://h:1883', topic: t}",
		"teams": "{url: 'https://example.com/workflows/x'}", "mattermost": "{url: 'https://example.com/hooks/k'}",
		"discord": "{webhook_url: 'https://discord.com/api/webhooks/1/t'}", "pubsub": "{project: p1, topic: orders}",
	}
	for _, typ := range builtin.Types() {
		name := typ.Name
		if _, ok := options[name]; !ok {
			t.Fatalf("no example options for the sink type %s: add them here", name)
		}
		// A type whose destinations have limits of their own takes a
		// limit per destination only.
		limit := "{rate: 1, per: 1s}"
		if deliversToDestinations(typ) {
			limit = "{rate: 1, per: 1s, per_key: true}"
		}
		doc += "  " + name + "-sink: {type: " + name + ", rate_limit: " + limit + ", options: " + options[name] + "}\n"
		for _, k := range confschema.Keys(Config{}) {
			if rest, ok := strings.CutPrefix(k.Path, "sinks.<name>."); ok && rest != sinkOptionsKey {
				// A sink without a digest shows digest: null, one value.
				rest, _, _ = strings.Cut(rest, "digest.")
				if rest == "" {
					rest = "digest"
				}
				want["sinks."+name+"-sink."+rest] = true
			}
		}
		var keys []confschema.Key
		if typ.Options != nil {
			keys = confschema.Keys(typ.Options)
		}
		if len(keys) == 0 {
			want["sinks."+name+"-sink.options"] = true // an empty mapping
		}
		for _, k := range keys {
			want["sinks."+name+"-sink.options."+k.Path] = true
		}
	}
	doc += "routes:\n  r: {events: [a], to: [{sink: log-sink, template: {line: x}, update_root: false}], sample: {type: a, key: k, data: {x: 1}}}\n"
	cfg, err := Parse([]byte(doc), "all.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := cfg.WriteRedacted(&out); err != nil {
		t.Fatal(err)
	}
	var shown map[string]any
	if err := yaml.Unmarshal([]byte(out.String()), &shown); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	flatten("", shown, got)
	for k := range want {
		if !got[k] {
			t.Errorf("config show lacks %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("config show prints %s, which nothing declares", k)
		}
	}
	for _, effective := range []string{"max_in_flight: 64", "protocol: http/protobuf", "shutdown_timeout: 30s", "timeout: 10s", "tls: starttls"} {
		if !strings.Contains(out.String(), effective) {
			t.Errorf("config show lacks the effective %q:\n%s", effective, out.String())
		}
	}
}

// flatten records the key path of every value below v; a mapping's path
// only when it is empty.
func flatten(prefix string, v any, into map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		into[prefix] = true
		return
	}
	for k, item := range m {
		flatten(confschema.Join(prefix, k), item, into)
	}
}

// TestMissingSecretIsItsOwnOnlyProblem: a sink whose ${VAR} is not set
// fails to build, and the missing variable is the one problem reported
// for it: neither the empty value's type nor the routes to the sink are
// blamed for it (what an unbuilt sink can do, posting in threads,
// delivering digests or to tenants, is unknown).
// (Mutations, each failing this test: buildSinks reporting the option
// problems of a missing variable's key too ("ports[0]: want a whole
// number, got a string"); compileTarget checking update_root
// or the tenant against a sink that failed to build, which said "this sink
// does not post in threads" / "only a sink of type destinations delivers
// to a tenant"; compileTable checking its digest, which said "this sink
// type cannot deliver digests".)
func TestMissingSecretIsItsOwnOnlyProblem(t *testing.T) {
	t.Parallel()
	doc := `sinks:
  alerts:
    type: slack
    options: {token: "${SLACK_BOT_TOKEN}", channel: C0123ABCD}
  customers:
    type: destinations
    rate_limit: {rate: 5, per: 1s, per_key: true}
    options: {schemes: ["${DEST_SCHEME}"], ports: ["${DEST_PORT}"]}
routes:
  incidents:
    events: [incident.*]
    to:
      - sink: alerts
        template: {text: "{{.type}}", thread_key: "{{.key}}"}
        update_root: true
  digests:
    events: [deploy.*]
    to:
      - sink: alerts
        template: {text: "{{.type}}"}
        digest: {window: 10s}
  tenants:
    events: [order.*]
    to:
      - sink: customers
        tenant: "{{.data.account_id}}"
`
	got := problemsOf(t, doc, nil)
	want := []string{
		"p.yaml:4:15: sinks.alerts.options.token: environment variable SLACK_BOT_TOKEN is not set",
		"p.yaml:8:25: sinks.customers.options.schemes[0]: environment variable DEST_SCHEME is not set",
		"p.yaml:8:52: sinks.customers.options.ports[0]: environment variable DEST_PORT is not set",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}
}
