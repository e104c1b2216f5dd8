package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// cliRun runs the binary in dir with exactly env (plus PATH and HOME) and
// args, and returns stdout, stderr and the exit code. Unlike env.run it
// passes no --config, so the file lookup itself is under test.
func cliRun(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, outboxdBinary(t), args...)
	c.Dir = dir
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// freshSchema names a schema of the test's own, dropped when it ends.
func freshSchema(t *testing.T) string {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "cli_" + hex.EncodeToString(suffix)
	pool := testdb.Pool(t, 1)
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secretConfig is a production-like plugins.yaml: no database URL, and
// sinks (and an HTTP token) whose secrets come from variables that the
// operator's shell does not have.
const secretConfig = `database:
  schema: %s
http:
  listen: 0.0.0.0:8080
  token: ${HTTP_TOKEN}
sinks:
  ops-slack:
    type: slack
    options:
      token: ${SLACK_BOT_TOKEN}
      channel: "#ops"
  partner:
    type: webhook
    options:
      url: https://partner.example/hook
      secret: ${PARTNER_WEBHOOK_SECRET}
routes:
  orders:
    events: [order.*]
    to:
      - sink: ops-slack
        template: {text: "order {{.data.id}}"}
`

// TestOperatorCommandsNeedOnlyTheDatabase runs the operator commands
// against a plugins.yaml whose sink secrets are unset, with only
// DATABASE_URL in the environment: migrate, routes apply, stats, dlq list
// and redrive, get, messages list, sinks list, pause and resume, and the
// completion of sink names all succeed, while config check (which
// validates everything, as serve does) names the unset variables. -o json
// and --json print the same.
// (Mutations: making withDB load config.Everything, or keeping the sinks'
// options under config.DatabaseOnly, fails this test at its first
// command, migrate.)
func TestOperatorCommandsNeedOnlyTheDatabase(t *testing.T) {
	t.Parallel()
	dir, schema := t.TempDir(), freshSchema(t)
	writeFile(t, dir, "plugins.yaml", fmt.Sprintf(secretConfig, schema))
	env := []string{"DATABASE_URL=" + testdb.URL()}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cliRun(t, dir, env, args...)
		if code != 0 {
			t.Fatalf("outboxd %v exited %d with only DATABASE_URL set\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
		return out
	}
	if out := run("migrate"); !strings.Contains(out, "routes applied") {
		t.Errorf("migrate did not apply the routes:\n%s", out)
	}
	run("routes", "apply")

	pool := testdb.Pool(t, 1)
	var id int64
	if err := pool.QueryRow(context.Background(), "INSERT INTO "+schema+`.messages (sink, dedup_key, payload, status, attempts, last_error)
		VALUES ('ops-slack', 'order-1', '{"text": "x"}', 'dead', 3, 'channel_not_found') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if out := run("stats"); !strings.Contains(out, "ops-slack") || !strings.Contains(out, "partner") {
		t.Errorf("stats lacks the configured sinks:\n%s", out)
	}
	if a, b := run("stats", "-o", "json"), run("stats", "--json"); !json.Valid([]byte(a)) || !strings.Contains(b, `"ops-slack"`) {
		t.Errorf("stats -o json / --json are not the stats JSON:\n%s\n%s", a, b)
	}
	if out := run("dlq", "list"); !strings.Contains(out, "channel_not_found") {
		t.Errorf("dlq list lacks the dead letter:\n%s", out)
	}
	var letters []struct{ ID int64 }
	if err := json.Unmarshal([]byte(run("dlq", "list", "-o", "json")), &letters); err != nil || len(letters) != 1 || letters[0].ID != id {
		t.Errorf("dlq list -o json: %v %+v", err, letters)
	}
	if out := run("get", strconv.FormatInt(id, 10)); !strings.Contains(out, "order-1") {
		t.Errorf("get lacks the message:\n%s", out)
	}
	run("messages", "list", "--status", "dead", "-o", "wide")
	run("sinks", "pause", "stale-name", "--force", "--reason", "test")
	if out := run("sinks", "list"); !strings.Contains(out, "slack") || !strings.Contains(out, "webhook") {
		t.Errorf("sinks list lacks the sinks' types:\n%s", out)
	}
	// Completion offers the configured sinks and the one only the
	// database knows (paused by name).
	if out := run("__complete", "sinks", "resume", ""); !strings.Contains(out, "ops-slack\n") || !strings.Contains(out, "stale-name\n") {
		t.Errorf("completion of sinks resume:\n%s", out)
	}
	run("sinks", "resume", "stale-name")
	run("dlq", "redrive", "--id", strconv.FormatInt(id, 10), "--yes")

	// config check validates everything, as serve does.
	out, errOut, code := cliRun(t, dir, env, "config", "check")
	if code != 2 || !strings.Contains(errOut, "SLACK_BOT_TOKEN") || !strings.Contains(errOut, "PARTNER_WEBHOOK_SECRET") {
		t.Errorf("config check with the secrets unset: exit %d\n%s%s", code, out, errOut)
	}
}

// TestMigrateStatusDryRunAndSQL: on a new schema, migrate status lists
// every migration pending with its checksum, --dry-run and migrate sql
// show what would run and create nothing; migrate names its target and
// records every migration's checksum, which status then shows applied.
// (Mutations: not recording the checksums in Migrate, or --dry-run calling
// Migrate, fail this test.)
func TestMigrateStatusDryRunAndSQL(t *testing.T) {
	t.Parallel()
	dir, schema := t.TempDir(), freshSchema(t)
	writeFile(t, dir, "plugins.yaml", fmt.Sprintf("database:\n  schema: %s\n", schema))
	env := []string{"DATABASE_URL=" + testdb.URL()}
	type status struct {
		Target struct {
			Host, Database, Schema string
		}
		Pending    int
		Migrations []struct {
			Version         int
			Checksum        string
			AppliedChecksum string `json:"applied_checksum"`
			Applied         bool
		}
	}
	readStatus := func() status {
		t.Helper()
		out, errOut, code := cliRun(t, dir, env, "migrate", "status", "-o", "json")
		var st status
		if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
			t.Fatalf("migrate status -o json: exit %d, %v\n%s%s", code, err, out, errOut)
		}
		return st
	}
	checksum := regexp.MustCompile(`^[0-9a-f]{64}$`)
	st := readStatus()
	if st.Target.Schema != schema || st.Target.Database == "" || st.Pending == 0 || st.Pending != len(st.Migrations) {
		t.Fatalf("status of a new schema: %+v", st)
	}
	for _, m := range st.Migrations {
		if !checksum.MatchString(m.Checksum) || m.Applied {
			t.Errorf("pending migration %d: %+v", m.Version, m)
		}
	}
	out, errOut, code := cliRun(t, dir, env, "migrate", "--dry-run")
	if code != 0 || strings.Count(out, "would apply migration") != st.Pending || !strings.Contains(out, "schema "+schema) {
		t.Errorf("migrate --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cliRun(t, dir, env, "migrate", "sql")
	if code != 0 || !strings.Contains(out, "CREATE TABLE messages") || !strings.HasPrefix(out, "-- outboxd migrate on schema "+schema) {
		t.Errorf("migrate sql: exit %d\n%.400s%s", code, out, errOut)
	}
	var exists bool
	if err := testdb.Pool(t, 1).QueryRow(context.Background(), "SELECT to_regnamespace($1) IS NOT NULL", schema).Scan(&exists); err != nil || exists {
		t.Fatalf("after --dry-run and sql the schema exists (%v): they must change nothing", err)
	}

	out, errOut, code = cliRun(t, dir, env, "migrate")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("migrating schema %s of database %s on ", schema, st.Target.Database)) {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	st = readStatus()
	if st.Pending != 0 {
		t.Errorf("after migrate %d pending", st.Pending)
	}
	for _, m := range st.Migrations {
		if !m.Applied || m.AppliedChecksum != m.Checksum {
			t.Errorf("migration %d after migrate: %+v", m.Version, m)
		}
	}
	if out, _, _ := cliRun(t, dir, env, "migrate", "sql"); !strings.Contains(out, "up to date") {
		t.Errorf("migrate sql of a current schema:\n%s", out)
	}
}

// TestMigrateWithoutADatabaseNamesWhereItLooked: with no --database-url,
// no URL variable, no database.url and no libpq variable naming a server,
// every database command refuses (exit 2), naming where it looked, rather
// than connecting to libpq's default.
// (Mutation: removing the check in databaseConfig makes migrate connect
// to libpq's default, the local socket and the user's own database, where
// on the test machine it silently created the schema and exited 0.)
func TestMigrateWithoutADatabaseNamesWhereItLooked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "plugins.yaml", "database:\n  schema: nowhere\n")
	for _, args := range [][]string{{"migrate"}, {"migrate", "status"}, {"stats"}} {
		out, errOut, code := cliRun(t, dir, nil, args...)
		if code != 2 {
			t.Errorf("outboxd %v without a database: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
		for _, where := range []string{"--database-url", "$OUTBOXD_DATABASE_URL", "$DATABASE_URL", "database.url in plugins.yaml", "$PGHOST"} {
			if !strings.Contains(errOut, where) {
				t.Errorf("outboxd %v: the error does not say it looked at %s:\n%s", args, where, errOut)
			}
		}
	}
}

// TestConfigCheckIsServesValidation: config check fails what serve would
// refuse (a listen that is not loopback without a token), a missing
// default file and an empty file, and passes --config ” and /dev/null;
// OUTBOXD_CONFIG names the file, the deprecated OUTBOX_CONFIG still does
// with a warning, and an OUTBOXD_ variable that overrides nothing is
// warned of with the nearest key.
// (Mutations: config check not calling serveProblems; Load accepting a
// missing default file; dropping unknownVariables' warnings: each fails
// this test.)
func TestConfigCheckIsServesValidation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	check := func(env []string, args ...string) (string, int) {
		t.Helper()
		out, errOut, code := cliRun(t, dir, env, append([]string{"config", "check"}, args...)...)
		return out + errOut, code
	}
	if out, code := check(nil); code != 2 || !strings.Contains(out, "no configuration file") || !strings.Contains(out, "--config ''") {
		t.Errorf("config check without plugins.yaml: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"--config", ""}, {"--config", os.DevNull}} {
		if out, code := check(nil, args...); code != 0 || !strings.Contains(out, "built-in defaults") {
			t.Errorf("config check %q: exit %d\n%s", args, code, out)
		}
	}
	empty := writeFile(t, dir, "empty.yaml", "\n# nothing\n")
	if out, code := check(nil, "--config", empty); code != 2 || !strings.Contains(out, "is empty") {
		t.Errorf("config check of an empty file: exit %d\n%s", code, out)
	}
	public := writeFile(t, dir, "public.yaml", "http:\n  listen: 0.0.0.0:8080\nsinks:\n  audit: {type: discard}\n")
	if out, code := check(nil, "--config", public); code != 2 || !strings.Contains(out, "public.yaml:2:3: http.listen: 0.0.0.0:8080 is not a loopback address") {
		t.Errorf("config check of a public listen without a token: exit %d\n%s", code, out)
	}
	if out, code := check([]string{"OUTBOXD_CONFIG=" + public, "OUTBOXD_HTTP_TOKEN=t0ken"}); code != 0 || !strings.Contains(out, "public.yaml is valid (1 sinks") {
		t.Errorf("config check of $OUTBOXD_CONFIG with OUTBOXD_HTTP_TOKEN: exit %d\n%s", code, out)
	}
	out, code := check([]string{"OUTBOX_CONFIG=" + public, "OUTBOX_HTTP_TOKEN=t0ken", "OUTBOXD_RELAY_BATCH_SIZ=5"})
	for _, want := range []string{"OUTBOX_CONFIG is deprecated: rename it OUTBOXD_CONFIG", "OUTBOX_HTTP_TOKEN is deprecated",
		"OUTBOXD_RELAY_BATCH_SIZ overrides no configuration key and is ignored: did you mean OUTBOXD_RELAY_BATCH_SIZE (relay.batch_size)?"} {
		if !strings.Contains(out, want) {
			t.Errorf("config check with OUTBOX_ variables lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	if code != 0 || strings.Contains(out, "t0ken") {
		t.Errorf("config check with OUTBOX_ variables: exit %d (or the token printed)\n%s", code, out)
	}
}

// TestUnknownNestedCommandExitsTwo: a typo in a subcommand is an error
// naming the nearest command, exit 2, not the group's help with exit 0.
// (Mutation: leaving finishCommands out of rootCommand makes `dlq lst`
// print help and exit 0.)
func TestUnknownNestedCommandExitsTwo(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"dlq lst":        `unknown command "lst" for "outboxd dlq"; did you mean "list"?`,
		"migrate stauts": `unknown command "stauts" for "outboxd migrate"`,
		"sinks lsit":     `did you mean "list"?`,
	} {
		out, errOut, code := cliRun(t, t.TempDir(), nil, strings.Fields(args)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("outboxd %s: exit %d, want 2 and %q\n%s%s", args, code, want, out, errOut)
		}
	}
}

// TestSinksTestChecksOrSendsAMarkedMessage: sinks test checks a Slack bot
// token with auth.test against the (fake) API and posts nothing, fails on
// a token Slack refuses, and refuses a webhook (which cannot be checked
// without sending) unless --yes, which delivers one marked test message.
// Another sink's unset secret does not matter.
// (Mutations: the Slack sink not implementing Check, sinks test sending
// without --yes, or loading config.Everything for it, fail this test.)
func TestSinksTestChecksOrSendsAMarkedMessage(t *testing.T) {
	t.Parallel()
	slack := fakeslack.New()
	t.Cleanup(slack.Close)
	var (
		mu     sync.Mutex
		bodies []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(b))
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	writeFile(t, dir, "plugins.yaml", fmt.Sprintf(`sinks:
  ops-slack:
    type: slack
    options: {token: "${SLACK_BOT_TOKEN}", channel: "#ops", api_url: %q}
  partner:
    type: webhook
    options: {url: %q, secret: %q, allow_private: true}
  other:
    type: slack
    options: {token: "${OTHER_SLACK_TOKEN}", channel: "#other"}
`, slack.APIURL(), hook.URL, webhookSecret))
	good := []string{"SLACK_BOT_TOKEN=" + fakeslack.Token}
	out, errOut, code := cliRun(t, dir, good, "sinks", "test", "ops-slack")
	if code != 0 || !strings.Contains(out, "ok, checked without sending") || len(slack.Posts()) != 0 {
		t.Errorf("sinks test ops-slack: exit %d, %d posts\n%s%s", code, len(slack.Posts()), out, errOut)
	}
	out, errOut, code = cliRun(t, dir, []string{"SLACK_BOT_TOKEN=xoxb-wrong"}, "sinks", "test", "ops-slack")
	if code != 1 || !strings.Contains(errOut, "invalid_auth") || strings.Contains(out+errOut, "xoxb-wrong") {
		t.Errorf("sinks test with a refused token: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cliRun(t, dir, good, "sinks", "test", "partner")
	if code != 2 || !strings.Contains(errOut, "--yes") {
		t.Errorf("sinks test partner without --yes: exit %d\n%s%s", code, out, errOut)
	}
	mu.Lock()
	sent := len(bodies)
	mu.Unlock()
	if sent != 0 {
		t.Fatalf("sinks test without --yes sent %d messages", sent)
	}
	out, errOut, code = cliRun(t, dir, good, "sinks", "test", "partner", "--yes")
	mu.Lock()
	defer mu.Unlock()
	if code != 0 || len(bodies) != 1 || !strings.Contains(bodies[0], "[outboxd sinks test]") {
		t.Errorf("sinks test partner --yes: exit %d, bodies %q\n%s%s", code, bodies, out, errOut)
	}
}

// TestRoutesTestShowsTargetsAndPayloads: routes test names every target an
// event reaches with its rendered payload, needs no database and stores
// nothing; an event no route matches says what publish would do.
// (Mutation: Table.Route not checking the route's patterns makes the
// unmatched event reach targets and fails this test.)
func TestRoutesTestShowsTargetsAndPayloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "plugins.yaml", fmt.Sprintf(secretConfig, "unused"))
	out, errOut, code := cliRun(t, dir, nil, "routes", "test", "--type", "order.created", "--data", `{"id": 42}`, "-o", "json")
	var report struct {
		Targets []struct {
			Route, Sink string
			Payload     map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &report); code != 0 || err != nil {
		t.Fatalf("routes test: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if len(report.Targets) != 1 || report.Targets[0].Sink != "ops-slack" || report.Targets[0].Payload["text"] != "order 42" {
		t.Errorf("routes test order.created: %+v", report.Targets)
	}
	out, errOut, code = cliRun(t, dir, nil, "routes", "test", "--type", "invoice.paid")
	if code != 0 || !strings.Contains(out, "no route matches invoice.paid: publish fails") {
		t.Errorf("routes test of an unmatched event: exit %d\n%s%s", code, out, errOut)
	}
}
