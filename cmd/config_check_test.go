package cmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/config"
)

// brokenEverywhere has a problem at every stage of validation: keys and
// types, durations, the schema's name, sink names, an unknown sink type,
// option decoding and the sink's own constructor, the sink policies,
// routes against built and unbuilt sinks, and the rule serve adds for a
// public listen.
const brokenEverywhere = `database:
  schema: Bad-Schema
relay:
  bach_size: 10
  lease: 30
  concurrency: many
http:
  listen: 0.0.0.0:8080
  ui: maybe
sinks:
  Mail:
    type: log
  mail:
    type: emial
  hook:
    type: webhook
    max_attempts: -1
    options:
      url: ftp://example.com/hook
      timeout: 5
  chat:
    type: slack
    options: {channel: C1}
  ops:
    type: slack
    options: {token: xoxb-1, channel: C1, colour: red}
routes:
  orders:
    events: [order.*]
    to:
      - sink: chat
        template: {txt: "x"}
      - sink: nowhere
  alerts:
    events: [alert.*]
    to:
      - sink: ops
        template: {text: "{{.data.id"}
routes_unmatched: sometimes
`

// TestConfigCheckReportsEveryProblemInOneRun: one run of config check
// reports every problem of a file broken at every stage, each with its
// file:line:col, and suggests the nearest registered type for a typo.
// (Mutations, each failing this test: the loader skipping a sink's
// constructor when its options had decoding problems (the ftp URL went
// unreported until the timeout was fixed); routes of a sink that failed to
// build compiled against an empty shape (txt went unreported); the
// non-loopback listen checked by config check only after the file loaded;
// database.schema left to serve; the unknown type without "did you mean";
// problem positions looked up by lower-cased key (sinks.Mail pointed at
// the line of sinks.mail).)
func TestConfigCheckReportsEveryProblemInOneRun(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(file, []byte(brokenEverywhere), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"config", "check", "--config", file},
		streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: config.EnvMap(nil)})
	if code != exitConfig {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitConfig, errOut.String())
	}
	want := []string{
		":2:3: database.schema: ",
		":4:3: unknown key relay.bach_size (did you mean relay.batch_size?)",
		":5:3: relay.lease: want a duration with a unit",
		":6:3: relay.concurrency: want a whole number",
		":8:3: http.listen: 0.0.0.0:8080 is not a loopback address",
		":9:3: http.ui: want true or false",
		":11:3: sinks.Mail: a sink name is lower case, write mail",
		`:14:5: sinks.mail.type: unknown sink type "emial" (did you mean email?`,
		":17:5: sinks.hook.max_attempts: must not be negative",
		":19:7: sinks.hook.options.url: scheme must be http or https",
		":20:7: sinks.hook.options.timeout: want a duration with a unit",
		":21:3: sinks.chat: set one of the options token",
		":26:43: unknown key sinks.ops.options.colour",
		":32:9: routes.orders.to[0].template: route orders, sink chat: this sink needs a template setting text or blocks",
		":32:20: routes.orders.to[0].template.txt: route orders, sink chat: not a field of this sink's payload",
		`:33:9: routes.orders.to[1].sink: route orders: no sink named "nowhere"`,
		":38:20: routes.alerts.to[0].template.text: route alerts, sink ops: template: text:1: unclosed action",
		`:39:1: routes_unmatched: want "error" or "drop"`,
	}
	got := errOut.String()
	// Each problem once: no stage repeats another's problem in its words.
	if !strings.Contains(got, fmt.Sprintf(": %d problems:", len(want))) {
		t.Errorf("config check does not report exactly %d problems", len(want))
	}
	for _, w := range want {
		if !strings.Contains(got, file+w) {
			t.Errorf("config check does not report %q", file+w)
		}
	}
	if !strings.Contains(got, "registered types: destinations, discard, ") {
		t.Errorf("the unknown type's problem does not list the registered types")
	}
	if t.Failed() {
		t.Logf("config check printed:\n%s", got)
	}
}
