package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCLIEndToEnd drives the binary through a message's whole life:
// migrate, enqueue (created, duplicate, unknown sink), serve delivering to a
// webhook receiver, stats, dlq list, a dead letter redriven once its
// receiver accepts it (back to pending with its attempts reset, then
// delivered once), and a poisoned one purged. (Mutation: a redrive that
// leaves the rows dead but reports them moved fails this test.)
func TestCLIEndToEnd(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv)+"  audit:\n    type: log\n", "")

	if out := e.mustRun("migrate"); !strings.Contains(out, "applied migrations") {
		t.Fatalf("migrate: %q", out)
	}
	if out := e.mustRun("migrate"); !strings.Contains(out, "up to date") {
		t.Fatalf("second migrate: %q", out)
	}
	first := e.mustRun("enqueue", "--sink", "partner", "--key", "order-1", "--payload", `{"order":1}`)
	if !strings.HasPrefix(first, "created ") {
		t.Fatalf("enqueue: %q", first)
	}
	id := strings.TrimSpace(strings.TrimPrefix(first, "created "))
	if again := e.mustRun("enqueue", "--sink", "partner", "--key", "order-1", "--text", "other"); again != "duplicate "+id+"\n" {
		t.Fatalf("duplicate enqueue printed %q, want duplicate %s", again, id)
	}
	e.mustRun("enqueue", "--sink", "audit", "--key", "audit-1", "--text", "hello")
	poison := e.mustRun("enqueue", "--sink", "partner", "--key", "bad-1", "--payload", `{"poison":true}`)
	poisonID := strings.TrimSpace(strings.TrimPrefix(poison, "created "))
	rcv.refuse("held-1", true) // until the receiver is fixed
	held := e.mustRun("enqueue", "--sink", "partner", "--key", "held-1", "--payload", `{"order":2}`)
	heldID := strings.TrimSpace(strings.TrimPrefix(held, "created "))

	_, stderr, code := e.run(nil, "enqueue", "--sink", "nope", "--key", "k", "--text", "x")
	if code != 2 || !strings.Contains(stderr, `unknown sink "nope"`) || !strings.Contains(stderr, "audit, partner") {
		t.Fatalf("unknown sink: exit %d, stderr %q", code, stderr)
	}
	if _, _, code := e.run(nil, "enqueue", "--sink", "partner", "--key", "k", "--payload", "{not json"); code != 2 {
		t.Fatalf("invalid payload exited %d, want 2", code)
	}

	srv := e.serve()
	eventually(t, 30*time.Second, "delivery to the webhook receiver", func() bool {
		distinct, _ := rcv.received()
		return distinct == 1
	})
	eventually(t, 30*time.Second, "the refused messages to be dead and the others sent", func() bool {
		s := e.stats()
		return s["partner"]["sent_last_hour"] == 1 && s["partner"]["dead"] == 2 && s["audit"]["sent_last_hour"] == 1
	})
	if strings.Contains(srv.Logs(), strings.TrimPrefix(webhookSecret, "whsec_")) {
		t.Errorf("serve logged the webhook secret")
	}
	if !strings.Contains(srv.Logs(), `"message delivered"`) {
		t.Errorf("the log sink logged nothing:\n%s", srv.Logs())
	}

	var letters []struct {
		ID        int64     `json:"id"`
		Sink      string    `json:"sink"`
		DedupKey  string    `json:"dedup_key"`
		Attempts  int       `json:"attempts"`
		LastError string    `json:"last_error"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("dlq", "list", "--json", "--sink", "partner")), &letters); err != nil {
		t.Fatal(err)
	}
	if len(letters) != 2 || fmt.Sprint(letters[0].ID) != poisonID || letters[0].DedupKey != "bad-1" ||
		!strings.Contains(letters[0].LastError, "400") || letters[0].UpdatedAt.IsZero() || letters[1].DedupKey != "held-1" {
		t.Fatalf("dlq list: %+v", letters)
	}
	if table := e.mustRun("dlq", "list"); !strings.Contains(table, "bad-1") || !strings.Contains(table, "poisoned payload") {
		t.Errorf("dlq list table lacks the dead letter or its error:\n%s", table)
	}
	if _, _, code := e.run(nil, "dlq", "redrive"); code != 2 {
		t.Errorf("dlq redrive without a selection exited %d, want 2", code)
	}
	rcv.refuse("held-1", false) // the receiver is fixed: redrive
	if out := e.mustRun("dlq", "redrive", "--id", heldID, "--yes"); out != "redriven 1\n" {
		t.Fatalf("redrive: %q", out)
	}
	eventually(t, 30*time.Second, "the redriven message to be delivered", func() bool {
		s := e.stats()["partner"]
		return s["sent_last_hour"] == 2 && s["dead"] == 1
	})
	var status string
	var attempts int
	if err := e.pool.QueryRow(t.Context(), "SELECT status, attempts FROM "+e.schema+".messages_all WHERE id = $1", heldID).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "sent" || attempts != 1 || rcv.deliveries("held-1") != 1 {
		t.Errorf("redriven row: %s after %d attempts (attempts reset by the redrive), received %d times; want sent, 1, 1",
			status, attempts, rcv.deliveries("held-1"))
	}
	if out := e.mustRun("dlq", "purge", "--all", "--sink", "partner", "--yes"); out != "purged 1\n" {
		t.Fatalf("purge: %q", out)
	}
	if out := e.mustRun("dlq", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("dlq after purge: %s", out)
	}
	if table := e.mustRun("stats"); !strings.Contains(table, "OLDEST_PENDING") || !strings.Contains(table, "partner") {
		t.Errorf("stats table:\n%s", table)
	}
	if distinct, total := rcv.received(); distinct != 2 || total != 2 {
		t.Errorf("receiver got %d deliveries of %d messages, want the two deliverable ones once each", total, distinct)
	}
}

// TestEnqueueFileBulk backfills 10,000 JSON lines in batches, then proves a
// rerun is idempotent and that stdin works.
func TestEnqueueFileBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  bulk:\n    type: discard\n", "")
	e.mustRun("migrate")
	const n = 10_000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"sink":"bulk","dedup_key":"k-%d","payload":{"i":%d},"ordering_key":"o-%d"}`+"\n", i, i, i%7)
	}
	file := filepath.Join(t.TempDir(), "backfill.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out := e.mustRun("enqueue", "--file", file); out != fmt.Sprintf("created %d, duplicate 0\n", n) {
		t.Fatalf("first run: %q", out)
	}
	t.Logf("enqueued %d lines in %s", n, time.Since(start).Round(time.Millisecond))
	if out := e.mustRun("enqueue", "--file", file); out != fmt.Sprintf("created 0, duplicate %d\n", n) {
		t.Fatalf("rerun: %q", out)
	}
	if s := e.stats()["bulk"]; s["pending"] != n {
		t.Fatalf("stats after backfill: %v", s)
	}
	out, stderr, code := e.run(strings.NewReader(`{"dedup_key":"stdin-1","payload":"x"}`+"\n"), "enqueue", "--sink", "bulk", "--file", "-")
	if code != 0 || out != "created 1, duplicate 0\n" {
		t.Fatalf("stdin: exit %d, %q %q", code, out, stderr)
	}
	out, stderr, code = e.run(strings.NewReader(`{"sink":"bulk","dedup_key":"ok","payload":1}`+"\n"+`{"sink":"elsewhere","dedup_key":"x","payload":1}`+"\n"), "enqueue", "--file", "-")
	if code != 2 || !strings.Contains(stderr, "line 2") || !strings.Contains(stderr, `unknown sink "elsewhere"`) || out != "" {
		t.Fatalf("bad line: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if s := e.stats()["bulk"]; s["pending"] != n+1 {
		t.Fatalf("the good line before a bad one was stored: %v", s)
	}
}

// TestConfigCommands checks config check/show on good and bad files and
// that show never prints a secret.
// (Mutation: config show without redactValue fails this test.)
func TestConfigCommands(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "  token: ${API_TOKEN}")
	e.extra = []string{"API_TOKEN=e2e-http-token-value"}
	if out := e.mustRun("config", "check"); !strings.Contains(out, "is valid (1 sinks, 0 routes)") {
		t.Fatalf("config check: %q", out)
	}
	show := e.mustRun("config", "show")
	for _, secret := range []string{"e2e-http-token-value", webhookSecret} {
		if strings.Contains(show, secret) {
			t.Errorf("config show prints a secret:\n%s", show)
		}
	}
	if !strings.Contains(show, "[REDACTED]") || !strings.Contains(show, "allow_private") {
		t.Errorf("config show:\n%s", show)
	}

	// A key typo, an unknown sink type, an unknown option and a bare number
	// for a duration option: all reported in one run, by config check and
	// by serve alike, with exit code 2.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("relay:\n  lese: 1s\nsinks:\n  x:\n    type: nope\n  y:\n    type: webhook\n    options: {url: 'https://example.com', secret: bogus-secret, colour: red, timeout: 5}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, command := range [][]string{{"config", "check"}, {"serve"}} {
		_, stderr, code := e.run(nil, append([]string{"--config", bad}, command...)...)
		for _, want := range []string{"bad.yaml:2:3", "relay.lese", "did you mean relay.lease?", `unknown key sinks.y.options.colour`,
			`sinks.x.type: unknown sink type "nope"`, "webhook", "sinks.y.options.timeout: want a duration with a unit"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v output lacks %q:\n%s", command, want, stderr)
			}
		}
		if code != 2 {
			t.Errorf("%v of a bad file exited %d, want 2", command, code)
		}
	}
	if _, _, code := e.run(nil, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "config", "check"); code != 2 {
		t.Errorf("a missing --config file exited %d, want 2", code)
	}
}

// TestRepositoryExampleConfigIsValid keeps the documented plugins.yaml
// loadable: every key in it is a real key and every sink type in it is
// registered in the binary. It never skips: a built-in type missing from the
// registration is exactly the regression it catches. (Mutation: leaving the
// email sink out of sinks/builtin's registrations fails this test.)
func TestRepositoryExampleConfigIsValid(t *testing.T) {
	t.Parallel()
	e := &env{t: t, config: filepath.Join("..", "..", "plugins.yaml")}
	e.extra = []string{"DATABASE_URL=postgres://app@db/app", "OUTBOXD_HTTP_TOKEN=t0ken-value",
		"SLACK_BOT_TOKEN=xoxb-example-token", "WEBHOOK_SECRET=" + webhookSecret}
	// config show loads the file: every key valid, every type registered,
	// every variable expanded, every sink built from its options.
	show := e.mustRun("config", "show")
	for _, secret := range []string{"t0ken-value", "xoxb-example-token", webhookSecret} {
		if strings.Contains(show, secret) {
			t.Errorf("config show of plugins.yaml prints %q:\n%s", secret, show)
		}
	}
}
