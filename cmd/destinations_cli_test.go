package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// destCLI runs the command line in this process against a fresh schema
// with a destinations sink, customers, and a webhook sink, partner, and
// OUTBOXD_SECRETS_KEY set, as an operator's shell would have it.
type destCLI struct {
	t      *testing.T
	pool   *pgxpool.Pool
	ob     *testdb.Outbox
	config string
	keys   *destinations.Keyring
	env    map[string]string
}

func newDestCLI(t *testing.T) *destCLI {
	t.Helper()
	t.Parallel()
	pool, ob := testdb.New(t)
	key, err := destinations.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := destinations.ParseKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	yaml := fmt.Sprintf("database:\n  url: %s\n  schema: %s\n%s  customers:\n    type: destinations\n", testdb.URL(), ob.Schema(), cliConfig)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return &destCLI{t: t, pool: pool, ob: ob, config: config, keys: keys,
		env: map[string]string{"USER": "carol", destinations.EnvSecretsKey: key}}
}

// run executes outboxd args with stdin on a terminal or not and returns
// stdout, stderr and the exit code.
func (c *destCLI) run(terminal bool, stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), append([]string{"--config", c.config}, args...),
		streams{In: strings.NewReader(stdin), Out: &out, Err: &errOut, Terminal: terminal,
			Env: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }})
	return out.String(), errOut.String(), code
}

// json runs a command that must succeed and decodes its -o json output.
func (c *destCLI) json(out any, args ...string) string {
	c.t.Helper()
	stdout, stderr, code := c.run(false, "", append(args, "-o", "json")...)
	if code != exitOK {
		c.t.Fatalf("outboxd %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		c.t.Fatalf("outboxd %s: %v in %q", strings.Join(args, " "), err, stdout)
	}
	return stdout
}

// signs reports whether the destination's stored secrets, opened as a
// relay opens them, include the secret text: a signature made with it
// is among the relay's.
// texts runs query, which selects one text column, and returns its rows.
func (c *destCLI) texts(t *testing.T, query string) []string {
	t.Helper()
	r, err := c.pool.Query(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *destCLI) signs(id, text string) bool {
	c.t.Helper()
	dir, err := c.ob.Directory(c.keys, slog.New(slog.DiscardHandler))
	if err != nil {
		c.t.Fatal(err)
	}
	l, found, err := dir.Find(c.t.Context(), id)
	if err != nil || !found {
		c.t.Fatalf("find %s: %v %v", id, found, err)
	}
	e, err := l.Endpoint(time.Now())
	if err != nil {
		c.t.Fatal(err)
	}
	s, err := standardwebhooks.ParseSecret(text)
	if err != nil {
		c.t.Fatalf("the secret printed is not a signing secret: %v", err)
	}
	at := time.Unix(1700000000, 0)
	return slices.ContainsFunc(e.Secrets, func(x standardwebhooks.Secret) bool { return x.Sign("msg", at, nil) == s.Sign("msg", at, nil) })
}

// compact is the JSON text raw without its spaces.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDestinationCommandsWithJSONOutput: create, get, update, list and
// rotate-secret with -o json print the API's JSON; create and
// rotate-secret print a secret the relay then signs with (a rotation's
// new one beside the old), shown that once: get, update and list never
// print a secret.
//
// Mutations, each failing this test: get answering with Created's shape
// (a "secret" field, even empty); Store.Create answering with a secret
// other than the one it sealed (the relay does not sign with it);
// rotate-secret passing an overlap of 0 (the old secret stops signing);
// update ignoring --description (the change is not in its answer).
func TestDestinationCommandsWithJSONOutput(t *testing.T) {
	c := newDestCLI(t)
	var created struct {
		destinations.Destination
		Secret string `json:"secret"`
	}
	c.json(&created, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/outboxd",
		"--events", "order.*,invoice.paid", "--description", "acme production", "--rate-limit", "5", "--metadata", `{"plan": "pro"}`)
	d := created.Destination
	if !strings.HasPrefix(d.ID, destinations.IDPrefix) || d.Tenant != "acme" || !slices.Equal(d.Events, []string{"order.*", "invoice.paid"}) ||
		d.RateLimit == nil || *d.RateLimit != 5 || !d.Enabled || compact(t, d.Metadata) != `{"plan":"pro"}` {
		t.Fatalf("create -o json: %+v", d)
	}
	if !strings.HasPrefix(created.Secret, "whsec_") || !c.signs(d.ID, created.Secret) {
		t.Fatalf("create's secret %q is not the one the relay signs with", created.Secret)
	}

	var got map[string]any
	raw := c.json(&got, "destinations", "get", d.ID, "--tenant", "acme")
	if got["id"] != d.ID || got["waiting"] != 0.0 || got["description"] != "acme production" {
		t.Errorf("get -o json: %s", raw)
	}
	var updated destinations.Destination
	raw += c.json(&updated, "destinations", "update", d.ID, "--tenant", "acme", "--description", "acme, v2", "--events", "order.*")
	if updated.Description != "acme, v2" || !slices.Equal(updated.Events, []string{"order.*"}) || updated.URL != d.URL {
		t.Errorf("update -o json: %+v", updated)
	}
	raw += c.json(&got, "destinations", "get", d.ID, "--tenant", "acme")
	if got["description"] != "acme, v2" {
		t.Errorf("get after update: %v", got)
	}
	var list struct {
		Destinations []map[string]any
		Next         string
	}
	raw += c.json(&list, "destinations", "list", "--tenant", "acme")
	if len(list.Destinations) != 1 || list.Destinations[0]["id"] != d.ID {
		t.Errorf("list -o json: %+v", list)
	}

	var rotated struct {
		ID, Secret         string
		OldSecretsExpireAt time.Time `json:"old_secrets_expire_at"`
	}
	before := time.Now()
	c.json(&rotated, "destinations", "rotate-secret", d.ID, "--tenant", "acme", "--overlap", "1h")
	if rotated.ID != d.ID || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Secret == created.Secret ||
		rotated.OldSecretsExpireAt.Before(before.Add(59*time.Minute)) {
		t.Fatalf("rotate-secret -o json: %+v", rotated)
	}
	if !c.signs(d.ID, rotated.Secret) || !c.signs(d.ID, created.Secret) {
		t.Error("during the overlap the relay does not sign with both the new and the old secret")
	}
	raw += c.json(&got, "destinations", "get", d.ID, "--tenant", "acme")
	raw += c.json(&list, "destinations", "list", "--tenant", "acme")
	for _, secret := range []string{created.Secret, rotated.Secret, strings.TrimPrefix(created.Secret, "whsec_"), strings.TrimPrefix(rotated.Secret, "whsec_")} {
		if strings.Contains(raw, secret) {
			t.Errorf("get, update or list printed a secret: %s", raw)
		}
	}
	if strings.Contains(raw, `"secret"`) {
		t.Errorf("get, update or list printed a secret field: %s", raw)
	}
}

// TestEnqueueToOneDestination: `outboxd enqueue --destination` enqueues
// through enqueue_destination(): the row carries the destination, a
// second run is a duplicate of the same row; an unknown destination, a
// sink that is not of type destinations and --destination with --file
// exit 2 saying why, storing nothing.
//
// Mutations, each failing this test: enqueueOne ignoring --destination
// (the row has no destination, the unknown one is stored); the sink type
// check left out (the partner row stored).
func TestEnqueueToOneDestination(t *testing.T) {
	c := newDestCLI(t)
	var created destinations.Created
	c.json(&created, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/outboxd")
	id := created.ID

	out, errOut, code := c.run(false, "", "enqueue", "--sink", "customers", "--destination", id, "--key", "welcome", "--payload", `{"hello": "acme"}`)
	if code != exitOK || !strings.HasPrefix(out, "created ") {
		t.Fatalf("enqueue --destination: exit %d, %q %q", code, out, errOut)
	}
	again, _, code := c.run(false, "", "enqueue", "--sink", "customers", "--destination", id, "--key", "welcome", "--payload", `{"hello": "acme"}`)
	if code != exitOK || again != "duplicate "+strings.TrimPrefix(out, "created ") {
		t.Errorf("the same message again: exit %d, %q; want the duplicate of %q", code, again, out)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--sink", "customers", "--destination", "dst_nope", "--key", "k1", "--text", "hi"}, `no destination "dst_nope"`},
		{[]string{"--sink", "partner", "--destination", id, "--key", "k2", "--text", "hi"}, `sink "partner" does not deliver to destinations; the sinks that do: customers`},
		{[]string{"--sink", "customers", "--destination", id, "--file", "-"}, "--destination does not go with --file"},
	} {
		if out, errOut, code := c.run(false, "", append([]string{"enqueue"}, tc.args...)...); code != exitConfig || !strings.Contains(errOut, tc.says) {
			t.Errorf("enqueue %s: exit %d, %q %q; want %d saying %s", strings.Join(tc.args, " "), code, out, errOut, exitConfig, tc.says)
		}
	}
	rows := c.texts(t, `SELECT sink || ' ' || dedup_key || ' ' || coalesce(headers->>'outboxd-destination', '-') FROM `+c.ob.Schema()+`.messages`)
	if !slices.Equal(rows, []string{"customers welcome " + id}) {
		t.Errorf("rows: %q; want the one for %s", rows, id)
	}
}

// TestPurgeOneDestinationsWaitingRows: `outboxd dlq purge --all --waiting
// --destination ID` counts the rows waiting on that destination (a dry
// run, -o json, changes nothing), and on a terminal asks before deleting
// exactly them; another destination's rows stay, and the purge is in the
// audit trail as the operator's with the destination.
//
// Mutations, each failing this test: the --destination flag bound to a
// variable the selection does not read (--waiting is then refused as
// needing --sink); describeSelection leaving the destination out (the
// question does not name it).
func TestPurgeOneDestinationsWaitingRows(t *testing.T) {
	c := newDestCLI(t)
	var gone, kept destinations.Created
	c.json(&gone, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/old")
	c.json(&kept, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/new")
	if _, errOut, code := c.run(false, "", "destinations", "disable", gone.ID, "--tenant", "acme", "--reason", "endpoint retired"); code != exitOK {
		t.Fatalf("disable: %q", errOut)
	}
	for i, id := range []string{gone.ID, gone.ID, kept.ID} {
		if _, errOut, code := c.run(false, "", "enqueue", "--sink", "customers", "--destination", id, "--key", fmt.Sprint("notice-", i), "--text", "hi"); code != exitOK {
			t.Fatalf("enqueue: %q", errOut)
		}
	}
	var plan map[string]any
	c.json(&plan, "dlq", "purge", "--all", "--waiting", "--destination", gone.ID, "--dry-run")
	if plan["purged"] != 2.0 || plan["dry_run"] != true || plan["token"] == "" {
		t.Fatalf("dry run: %v; want the 2 rows waiting on %s", plan, gone.ID)
	}
	out, errOut, code := c.run(true, "y\n", "dlq", "purge", "--all", "--waiting", "--destination", gone.ID)
	if code != exitOK || out != "purged 2\n" || !strings.Contains(errOut, "purge 2 dead letter(s) and waiting rows of destination "+gone.ID+"? [y/N]") {
		t.Fatalf("purge on a terminal: exit %d, out %q, err %q", code, out, errOut)
	}
	left := c.texts(t, `SELECT headers->>'outboxd-destination' FROM `+c.ob.Schema()+`.messages`)
	if !slices.Equal(left, []string{kept.ID}) {
		t.Errorf("rows left: %q; want the one of %s", left, kept.ID)
	}
	trail := c.ob.Audit()
	all, err := trail.List(t.Context(), c.pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var entries []audit.Entry
	for _, e := range all {
		if e.Action == audit.ActionPurge {
			entries = append(entries, e)
		}
	}
	if len(entries) != 1 || entries[0].Count != 2 || !strings.HasPrefix(entries[0].Actor, "carol") || !strings.Contains(string(entries[0].Filter), `"destination": "`+gone.ID+`"`) {
		t.Errorf("audit trail of purges: %+v; want carol's purge of 2 naming %s", entries, gone.ID)
	}
}
