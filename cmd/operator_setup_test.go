package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// runWith runs outboxd args in this process with only the variables of
// env set, and returns stdout, stderr and the exit code.
func runWith(env map[string]string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := execute(context.Background(), args, streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: config.EnvMap(env)})
	return out.String(), errOut.String(), code
}

// operatorCommands are the commands that need only the database, each
// with arguments that pass its own checks, so that what they do without
// a configuration or a migrated schema is the shared path's doing.
var operatorCommands = [][]string{
	{"stats"},
	{"sinks", "list"},
	{"sinks", "pause", "partner"},
	{"sinks", "resume", "partner"},
	{"sinks", "forget", "stale"},
	{"dlq", "list"},
	{"dlq", "redrive", "--all", "--dry-run"},
	{"dlq", "purge", "--all", "--dry-run"},
	{"get", "1"},
	{"messages", "list"},
	{"audit", "list"},
	{"destinations", "list", "--tenant", "acme"},
	{"destinations", "get", "dst_nope", "--tenant", "acme"},
}

// Run where no plugins.yaml is found, every operator command refuses as
// enqueue does: exit 2, naming where it looked and --config given empty.
// Nothing is printed on stdout, and nothing changes (the pause is not
// set). With --config given empty, stats and sinks list run on the built-in
// defaults, warn that they say nothing of which sinks exist, and stats no
// longer calls the sink of a row "not configured on this relay".
// (Mutation: without the refusal in app.configWith, stats, sinks list and
// the others run with the built-in defaults and exit 0; this test fails.)
func TestOperatorCommandsRefuseWithoutAConfiguration(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(config.DefaultFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the test needs a working directory without ./%s: %v", config.DefaultFile, err)
	}
	pool, ob := testdb.New(t)
	if _, err := ob.Enqueue(t.Context(), pool, outboxd.Message{Sink: "partner", DedupKey: "order-1", Payload: map[string]int{"id": 1}}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OUTBOXD_DATABASE_URL": testdb.URL(), "OUTBOXD_DATABASE_SCHEMA": ob.Schema()}

	_, enqueueErr, code := runWith(env, "enqueue", "--sink", "partner", "--key", "k", "--text", "hi")
	if code != exitConfig {
		t.Fatalf("enqueue without a configuration: exit %d, want %d\n%s", code, exitConfig, enqueueErr)
	}
	for _, args := range append(operatorCommands, []string{"migrate"}, []string{"migrate", "status"}, []string{"routes", "apply"},
		[]string{"sinks", "test", "partner"}, []string{"routes", "test", "--type", "order.created"}) {
		out, errOut, code := runWith(env, args...)
		if code != exitConfig || out != "" || errOut != enqueueErr {
			t.Errorf("%v without a configuration: exit %d (want %d), stdout %q, stderr %q (want enqueue's %q)",
				args, code, exitConfig, out, errOut, enqueueErr)
		}
	}
	for _, want := range []string{"looked for", config.DefaultFile, "--config ''"} {
		if !strings.Contains(enqueueErr, want) {
			t.Errorf("the refusal does not say %q: %s", want, enqueueErr)
		}
	}
	if states, err := ob.Operator.SinkStates(t.Context(), pool); err != nil || len(states) != 0 {
		t.Errorf("a refused pause changed the database: %v %v", states, err)
	}

	out, errOut, code := runWith(env, "--config", "", "stats")
	if code != exitOK || !strings.Contains(out, "partner") || strings.Contains(out, notConfiguredNote) ||
		!strings.Contains(errOut, "the built-in defaults configure no sink") {
		t.Errorf("stats --config '': exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = runWith(env, "--config", "", "sinks", "list")
	if code != exitOK || !strings.HasPrefix(out, "NAME") || !strings.Contains(errOut, "the built-in defaults configure no sink") {
		t.Errorf("sinks list --config '': exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// On a database outboxd has not migrated, every operator command says to
// run outboxd migrate (exit 1), not only that a relation does not exist.
// (Mutation: withSession returning run's error without
// explainUnmigrated fails this test.)
func TestOperatorCommandsOnAnUnmigratedDatabaseSayToMigrate(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plugins.yaml")
	// A schema nothing created: the database of a first deployment.
	schema := fmt.Sprintf("never_migrated_%d", os.Getpid())
	text := fmt.Sprintf("database:\n  url: %s\n  schema: %s\n%s", testdb.URL(), schema, cliConfig)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range operatorCommands {
		out, errOut, code := runWith(nil, append([]string{"--config", file}, args...)...)
		if code != exitFailure || out != "" || !strings.Contains(errOut, "schema "+schema) ||
			!strings.Contains(errOut, "is not migrated to this version of outboxd: run `outboxd migrate`") {
			t.Errorf("%v on an unmigrated database: exit %d (want %d)\nstdout: %s\nstderr: %s", args, code, exitFailure, out, errOut)
		}
	}
}

// A lookup of what does not exist exits 1 in every command: get of an
// unknown message as destinations get of an unknown destination.
// (Mutation: destinations' ErrNotFound marked badInput again, as before,
// fails this test with exit 2.)
func TestNotFoundExitsOne(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{{"get", "999999"}, {"destinations", "get", "dst_nope", "--tenant", "acme"}} {
		if out, errOut, code := c.run(false, "", args...); code != exitFailure || out != "" {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %q", args, code, exitFailure, out, errOut)
		}
	}
}

// The root command's help lists every exit code with its meaning.
// (Mutation: the help without exitCodesHelp fails this test.)
func TestRootHelpListsTheExitCodes(t *testing.T) {
	t.Parallel()
	out, _, code := runWith(nil, "--help")
	if code != exitOK || !strings.Contains(out, "Exit codes, the same for every command:") {
		t.Fatalf("outboxd --help: exit %d\n%s", code, out)
	}
	for _, c := range exitCodes {
		if !strings.Contains(out, fmt.Sprintf("  %d  %s", c.code, c.meaning)) {
			t.Errorf("the help does not list exit code %d", c.code)
		}
	}
}

// config show -o json prints the same effective configuration as the
// YAML, key for key, with the same secrets redacted; an unknown format is
// refused with exit 2.
// (Mutation: -o json printing the YAML fails this test.)
func TestConfigShowAsJSON(t *testing.T) {
	t.Parallel()
	const password, signing = "s3cret-pw", "whsec_dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQtMzJieXRlcw=="
	file := filepath.Join(t.TempDir(), "plugins.yaml")
	text := fmt.Sprintf(`database: {url: "postgres://outboxd:%s@db.test/app"}
telemetry: {service_name: "a \"quoted\" \\ name\nover two lines"}
sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: %q}
`, password, signing)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	asYAML, errOut, code := runWith(nil, "--config", file, "config", "show")
	if code != exitOK {
		t.Fatalf("config show: exit %d: %s", code, errOut)
	}
	asJSON, errOut, code := runWith(nil, "--config", file, "config", "show", "-o", "json")
	if code != exitOK {
		t.Fatalf("config show -o json: exit %d: %s", code, errOut)
	}
	if strings.Contains(asJSON, password) || strings.Contains(asJSON, signing) || !strings.Contains(asJSON, "[REDACTED]") {
		t.Errorf("config show -o json does not redact the secrets:\n%s", asJSON)
	}
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal([]byte(asYAML), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(asJSON), &fromJSON); err != nil {
		t.Fatalf("config show -o json is not JSON: %v\n%s", err, asJSON)
	}
	// Through JSON, so that numbers compare alike.
	normal, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatal(err)
	}
	var fromYAMLNormal any
	if err := json.Unmarshal(normal, &fromYAMLNormal); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAMLNormal, fromJSON) {
		t.Errorf("the JSON differs from the YAML:\n%s\n%s", normal, asJSON)
	}
	if _, _, code := runWith(nil, "--config", file, "config", "show", "-o", "xml"); code != exitConfig {
		t.Errorf("config show -o xml: exit %d, want %d", code, exitConfig)
	}
}
