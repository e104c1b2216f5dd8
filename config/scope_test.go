package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// secretsConfig has sinks whose options need unset variables (and a
// webhook option that does not exist), an HTTP token from an unset
// variable, and a route whose template is fine for Slack.
const secretsConfig = `database: {schema: ops}
http: {token: "${HTTP_TOKEN}"}
sinks:
  ops-slack:
    type: slack
    max_attempts: 4
    rate_limit: {rate: 1, per: 1s, per_key: true}
    options: {token: "${SLACK_BOT_TOKEN}", channel: "#ops"}
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "${PARTNER_SECRET}", colour: red}
routes:
  orders:
    events: [order.*]
    to:
      - sink: ops-slack
        template: {text: "order {{.data.id}}"%s}
`

func loadFile(t *testing.T, text string, scope Scope, env map[string]string, environ ...string) (Loaded, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(Source{Path: path, PathGiven: true, Env: EnvMap(env), Environ: environ}, scope)
}

// DatabaseOnly loads the database block, the sinks' names, types and
// policies and the routes without the sinks' options (nor http): their
// unset variables and bad options do not matter, while Everything reports
// them. Routes are still checked against the sink types' shapes: a field
// Slack does not have fails either way.
// A per-key rate limit, which needs the built sink to check, is not
// refused for lack of it.
// (Mutations: compiling DatabaseOnly's routes against zero shapes passes
// the unknown field; not dropping the options reports SLACK_BOT_TOKEN;
// relay's per_key check without its c.Sink != nil refuses the limit.)
func TestDatabaseOnlyLeavesSinkOptionsOut(t *testing.T) {
	t.Parallel()
	loaded, err := loadFile(t, strings.Replace(secretsConfig, "%s", "", 1), DatabaseOnly, nil)
	if err != nil {
		t.Fatalf("DatabaseOnly load: %v", err)
	}
	cfg := loaded.Config
	if cfg.Database.Schema != "ops" || cfg.Sinks["ops-slack"].Type != "slack" || cfg.Sinks["ops-slack"].MaxAttempts != 4 ||
		cfg.Sinks["partner"].Type != "webhook" || !slices.Equal(cfg.RouteTable().Routes(), []string{"orders"}) {
		t.Errorf("DatabaseOnly configuration: %+v, routes %v", cfg.Sinks, cfg.RouteTable().Routes())
	}
	_, err = loadFile(t, strings.Replace(secretsConfig, "%s", "", 1), Everything, nil)
	for _, want := range []string{"SLACK_BOT_TOKEN", "PARTNER_SECRET", "HTTP_TOKEN", "colour"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Everything load does not report %s: %v", want, err)
		}
	}
	_, err = loadFile(t, strings.Replace(secretsConfig, "%s", `, bogus: "x"`, 1), DatabaseOnly, nil)
	if err == nil || !strings.Contains(err.Error(), "routes.orders.to[0].template.bogus") {
		t.Errorf("DatabaseOnly load of a template field Slack lacks: %v", err)
	}
}

// OUTBOXD_ variables override keys; the deprecated OUTBOX_ ones still do,
// with a warning, unless an OUTBOXD_ one of the same key is set; an
// OUTBOXD_ variable that overrides nothing is warned of with the nearest
// variable and its key.
// OUTBOXD_SECRETS_KEY, read by package destinations, is no typo.
// (Mutations: LookupPrefixed not reading DeprecatedEnvPrefix; the warning
// without the nearest name; SecretsKeyEnv left out of the known variables.)
func TestEnvironmentPrefixes(t *testing.T) {
	t.Parallel()
	const doc = "sinks:\n  audit: {type: discard}\n"
	loaded, err := loadFile(t, doc, Everything, map[string]string{"OUTBOX_RELAY_BATCH_SIZE": "7"})
	if err != nil || loaded.Config.Relay.BatchSize != 7 || len(loaded.Warnings) != 1 ||
		!strings.Contains(loaded.Warnings[0], "OUTBOX_RELAY_BATCH_SIZE is deprecated: rename it OUTBOXD_RELAY_BATCH_SIZE") {
		t.Errorf("OUTBOX_RELAY_BATCH_SIZE: %v, %+v", err, loaded)
	}
	loaded, err = loadFile(t, doc, Everything, map[string]string{"OUTBOX_RELAY_BATCH_SIZE": "7", "OUTBOXD_RELAY_BATCH_SIZE": "9"})
	if err != nil || loaded.Config.Relay.BatchSize != 9 || len(loaded.Warnings) != 0 {
		t.Errorf("OUTBOXD_ beside OUTBOX_: %v, batch size %d, warnings %q", err, loaded.Config.Relay.BatchSize, loaded.Warnings)
	}
	loaded, err = loadFile(t, doc, Everything, nil, "OUTBOXD_RELAY_LEESE=1s", "OUTBOXD_SINKS_AUDIT_MAX_ATTEMPTS=3", "HOME=/root", SecretsKeyEnv+"=k1:x")
	want := "environment variable OUTBOXD_RELAY_LEESE overrides no configuration key and is ignored: did you mean OUTBOXD_RELAY_LEASE (relay.lease)?"
	if err != nil || !slices.Equal(loaded.Warnings, []string{want}) {
		t.Errorf("unknown OUTBOXD_ variable: %v, warnings %q", err, loaded.Warnings)
	}
}
