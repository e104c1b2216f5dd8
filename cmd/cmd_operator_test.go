package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/api"
)

// cli runs the command line in this process against a fresh schema: the
// way a person at a terminal (or a script) would.
type cli struct {
	t      *testing.T
	api    *cliDB
	config string
}

// cliDB is the schema the commands of a cli work on.
type cliDB struct {
	pool *pgxpool.Pool
	ob   *testdb.Outbox
	ctx  context.Context
}

func (d *cliDB) deadRows(t *testing.T, sink string, errs ...string) []int64 {
	t.Helper()
	return testdb.DeadRows(t, d.pool, d.ob, sink, errs...)
}

// cliConfig has one sink, partner, with a secret in its options.
const cliConfig = `sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "whsec_dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQtMzJieXRlcw=="}
`

func newCLI(t *testing.T) *cli {
	t.Helper()
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	a := &cliDB{pool: pool, ob: ob, ctx: ctx}
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	yaml := fmt.Sprintf("database:\n  url: %s\n  schema: %s\n%s", testdb.URL(), a.ob.Schema(), cliConfig)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return &cli{t: t, api: a, config: config}
}

// run executes outboxd args with stdin; terminal says whether a person is
// at it. It returns stdout, stderr and the exit code.
func (c *cli) run(terminal bool, stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	return c.runReading(terminal, strings.NewReader(stdin), args...)
}

// runReading is run with stdin read from in.
func (c *cli) runReading(terminal bool, in io.Reader, args ...string) (string, string, int) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	env := config.EnvMap(map[string]string{"USER": "carol"})
	code := execute(context.Background(), append([]string{"--config", c.config}, args...),
		streams{In: in, Out: &out, Err: &errOut, Env: env, Terminal: terminal})
	return out.String(), errOut.String(), code
}

// answerAfter is a person's answer typed after meanwhile ran: what
// happens while the question is on the screen.
type answerAfter struct {
	meanwhile func()
	answer    io.Reader
}

func (a *answerAfter) Read(p []byte) (int, error) {
	if a.meanwhile != nil {
		a.meanwhile()
		a.meanwhile = nil
	}
	return a.answer.Read(p)
}

func (c *cli) deadCount() int {
	return testdb.StatusCounts(c.t, c.api.pool, c.api.ob, "")["dead"]
}

// On a terminal, purge and redrive count with a dry run and ask; only yes
// acts, on exactly the rows counted. --yes skips the question, which a
// script (no terminal) must pass (TestDestructiveCommandsNeedYesWithoutATerminal).
// (Mutations, each failing this test: asking skipped on a terminal; a
// confirmed --all without UpToID, which purges a row that died after the
// count.)
func TestDeadLetterCommandsAskOnATerminal(t *testing.T) {
	c := newCLI(t)
	ids := c.api.deadRows(t, "partner", "timeout", "timeout", "400 bad request")

	out, errOut, code := c.run(true, "n\n", "dlq", "purge", "--all", "--sink", "partner", "--error", "TIMEOUT")
	if code != exitFailure || !strings.Contains(errOut, "purge 2 dead letter(s) of sink partner whose last error contains \"TIMEOUT\"? [y/N]") ||
		!strings.Contains(errOut, "not confirmed; nothing changed") || c.deadCount() != 3 {
		t.Fatalf("answered no: code %d, out %q, err %q, dead %d", code, out, errOut, c.deadCount())
	}
	// A dead letter of the selection that dies while the question is on
	// the screen was not counted: yes purges the two counted, not it.
	var late int64
	dies := func() {
		if err := c.api.pool.QueryRow(c.api.ctx, "INSERT INTO "+c.api.ob.Schema()+`.messages (sink, dedup_key, payload, status, attempts, last_error)
			VALUES ('partner', 'late', '{}', 'dead', 2, 'timeout') RETURNING id`).Scan(&late); err != nil {
			t.Error(err)
		}
	}
	out, errOut, code = c.runReading(true, &answerAfter{meanwhile: dies, answer: strings.NewReader("y\n")},
		"dlq", "purge", "--all", "--sink", "partner", "--error", "timeout")
	if code != exitOK || out != "purged 2\n" || c.deadCount() != 2 || late == 0 {
		t.Fatalf("answered yes: code %d, out %q, err %q, dead %d (want the one that died after the count left)", code, out, errOut, c.deadCount())
	}
	if _, errOut, code := c.run(false, "", "dlq", "purge", "--id", fmt.Sprint(late), "--yes"); code != exitOK || c.deadCount() != 1 {
		t.Fatalf("purge the late dead letter: code %d, err %q", code, errOut)
	}
	out, _, code = c.run(true, "", "dlq", "purge", "--all", "--dry-run")
	if code != exitOK || out != "would be purged: 1\n" || c.deadCount() != 1 {
		t.Fatalf("dry run: code %d, out %q", code, out)
	}
	// -o json prints the API's answer (mutation checked: the json case
	// removed, which prints "would be purged: 1").
	out, _, code = c.run(true, "", "dlq", "purge", "--all", "--dry-run", "-o", "json")
	var answer struct {
		Purged int64  `json:"purged"`
		DryRun bool   `json:"dry_run"`
		Token  string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &answer); code != exitOK || err != nil || answer.Purged != 1 || !answer.DryRun || answer.Token == "" {
		t.Fatalf("dry run -o json: code %d, out %q, %v", code, out, err)
	}
	out, errOut, code = c.run(true, "", "dlq", "redrive", "--id", fmt.Sprint(ids[2]), "--yes")
	if code != exitOK || out != "redriven 1\n" || errOut != "" || c.deadCount() != 0 {
		t.Fatalf("--yes: code %d, out %q, err %q", code, out, errOut)
	}
	c.api.deadRows(t, "other", "x")
	out, errOut, code = c.run(false, "", "dlq", "purge", "--all", "--yes")
	if code != exitOK || out != "purged 1\n" || errOut != "" {
		t.Fatalf("no terminal, --yes: code %d, out %q, err %q", code, out, errOut)
	}
}

// A confirmed --all acts on the rows counted: an older row that dies while
// the question is on the screen (failed when counted) is left; a counted
// row redriven meanwhile makes the confirmation refuse with the new count
// (exit 1), deleting nothing.
// (Mutations, each failing this test: the command confirming without the
// dry run's token (the older row purged, as the up_to_id of before did);
// purge.sql ignoring @digest.)
func TestDeadLetterCommandsConfirmExactlyTheRowsCounted(t *testing.T) {
	c := newCLI(t)
	ids := c.api.deadRows(t, "partner", "timeout", "timeout", "timeout")
	exec := func(statement string, id int64) {
		if _, err := c.api.pool.Exec(c.api.ctx, strings.ReplaceAll(statement, "{schema}", c.api.ob.Schema()), id); err != nil {
			t.Error(err)
		}
	}
	exec("UPDATE {schema}.messages SET status = 'failed' WHERE id = $1", ids[0])
	dies := func() { exec("UPDATE {schema}.messages SET status = 'dead', updated_at = now() WHERE id = $1", ids[0]) }
	out, errOut, code := c.runReading(true, &answerAfter{meanwhile: dies, answer: strings.NewReader("y\n")}, "dlq", "purge", "--all")
	if code != exitOK || out != "purged 2\n" || c.deadCount() != 1 {
		t.Fatalf("answered yes: code %d, out %q, err %q, dead %d (want the older row that died after the count left)", code, out, errOut, c.deadCount())
	}
	c.api.deadRows(t, "other", "x")
	redriven := func() { exec("UPDATE {schema}.messages SET status = 'pending' WHERE id = $1", ids[0]) }
	_, errOut, code = c.runReading(true, &answerAfter{meanwhile: redriven, answer: strings.NewReader("y\n")}, "dlq", "purge", "--all")
	if code != exitFailure || !strings.Contains(errOut, "the selection changed since it was counted") || !strings.Contains(errOut, "it now holds 1") ||
		c.deadCount() != 1 {
		t.Fatalf("a counted row redriven meanwhile: code %d, err %q, dead %d", code, errOut, c.deadCount())
	}
}

// --id that names no dead letter exits 1 with a message, after acting on
// the ids that do.
// (Mutation: missingDeadLetters returning nil fails this test.)
func TestDeadLetterCommandsRefuseUnknownIDs(t *testing.T) {
	c := newCLI(t)
	ids := c.api.deadRows(t, "partner", "boom")
	out, errOut, code := c.run(false, "", "dlq", "redrive", "--id", "999999", "--yes")
	if code != exitFailure || out != "redriven 0\n" || !strings.Contains(errOut, "no dead letter with id 999999") {
		t.Fatalf("unknown id: code %d, out %q, err %q", code, out, errOut)
	}
	out, errOut, code = c.run(false, "", "dlq", "purge", "--id", fmt.Sprint(ids[0]), "--id", "999998", "--yes")
	if code != exitFailure || out != "purged 1\n" || !strings.Contains(errOut, "no dead letter with id 999998") {
		t.Fatalf("one known, one unknown: code %d, out %q, err %q", code, out, errOut)
	}
	_, errOut, code = c.run(true, "", "dlq", "purge", "--id", "999997")
	if code != exitFailure || !strings.Contains(errOut, "no dead letter with id 999997") || strings.Contains(errOut, "[y/N]") {
		t.Fatalf("unknown id on a terminal: code %d, err %q (nothing to confirm)", code, errOut)
	}
	for _, args := range [][]string{{"dlq", "purge"}, {"dlq", "purge", "--id", "1", "--all"}, {"dlq", "redrive", "--all", "--waiting"}, {"dlq", "purge", "--all", "--waiting"}} {
		if _, _, code := c.run(false, "", args...); code != exitConfig {
			t.Errorf("%v: exit %d, want %d", args, code, exitConfig)
		}
	}
}

// get shows one message by id or by sink and key; messages list pages.
func TestGetAndMessagesList(t *testing.T) {
	c := newCLI(t)
	ctx := c.api.ctx
	var ids []int64
	for i := range 3 {
		res, err := c.api.ob.Enqueue(ctx, c.api.pool, outboxd.Message{Sink: "partner", DedupKey: fmt.Sprint("order-", i),
			Payload: map[string]string{"note": "line\x1b[31m"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	out, _, code := c.run(false, "", "get", fmt.Sprint(ids[1]))
	if code != exitOK || !strings.Contains(out, "order-1") || !strings.Contains(out, `"note": "line\u001b[31m"`) || strings.Contains(out, "\x1b") {
		t.Fatalf("get by id: code %d\n%s", code, out)
	}
	out, _, code = c.run(false, "", "get", "--sink", "partner", "--key", "order-2", "--json")
	var m api.MessageReport
	if code != exitOK || json.Unmarshal([]byte(out), &m) != nil || m.ID != ids[2] {
		t.Fatalf("get by key: code %d\n%s", code, out)
	}
	if _, errOut, code := c.run(false, "", "get", "999999"); code != exitFailure || !strings.Contains(errOut, "no such message") {
		t.Errorf("get of an unknown id: %d %q", code, errOut)
	}
	for _, args := range [][]string{{"get"}, {"get", "1", "--sink", "partner", "--key", "x"}, {"get", "--sink", "partner"}, {"get", "x"}} {
		if _, _, code := c.run(false, "", args...); code != exitConfig {
			t.Errorf("%v: exit %d, want %d", args, code, exitConfig)
		}
	}

	out, errOut, code := c.run(false, "", "messages", "list", "--sink", "partner", "--limit", "2")
	if code != exitOK || !strings.Contains(out, "order-2") || !strings.Contains(out, "order-1") || strings.Contains(out, "order-0") ||
		!strings.Contains(errOut, fmt.Sprintf("--before %d", ids[1])) {
		t.Fatalf("first page: code %d\n%s%s", code, out, errOut)
	}
	out, _, code = c.run(false, "", "messages", "list", "--before", fmt.Sprint(ids[1]), "--status", "pending", "--since", "1h", "--json")
	var page operator.MessagePage
	if code != exitOK || json.Unmarshal([]byte(out), &page) != nil || len(page.Messages) != 1 || page.Messages[0].ID != ids[0] {
		t.Fatalf("second page: code %d\n%s", code, out)
	}
	for _, args := range [][]string{{"messages", "list", "--status", "lost"}, {"messages", "list", "--since", "yesterday"}} {
		if _, _, code := c.run(false, "", args...); code != exitConfig {
			t.Errorf("%v: exit %d, want %d", args, code, exitConfig)
		}
	}
}

// sinks pause and resume record who (--by, else $USER@host) and why.
// (Mutation: sinks pause not calling PauseSink fails this test.)
func TestSinksPauseAndResume(t *testing.T) {
	c := newCLI(t)
	out, _, code := c.run(false, "", "sinks", "pause", "partner", "--for", "15m", "--reason", "partner maintenance")
	if code != exitOK || !strings.HasPrefix(out, "paused partner until ") {
		t.Fatalf("pause: %d %q", code, out)
	}
	states, err := c.api.ob.SinkStates(c.api.ctx, c.api.pool)
	if err != nil {
		t.Fatal(err)
	}
	if s := states["partner"]; !s.Paused() || !strings.HasPrefix(s.ChangedBy, "carol@") || s.ChangeReason != "partner maintenance" {
		t.Fatalf("after pause: %+v", s)
	}
	out, _, code = c.run(false, "", "sinks", "resume", "partner", "--by", "dave")
	if code != exitOK || out != "resumed partner\n" {
		t.Fatalf("resume: %d %q", code, out)
	}
	out, _, _ = c.run(false, "", "sinks", "resume", "partner")
	if out != "partner was not paused\n" {
		t.Errorf("second resume: %q", out)
	}
	out, _, _ = c.run(false, "", "sinks", "pause", "partner")
	if out != "paused partner until resumed\n" {
		t.Errorf("pause without --for: %q", out)
	}
	for _, args := range [][]string{{"sinks", "pause"}, {"sinks", "pause", "Bad Name"}, {"sinks", "pause", "partner", "--for", "-1m"}} {
		if _, _, code := c.run(false, "", args...); code != exitConfig {
			t.Errorf("%v: exit %d, want %d", args, code, exitConfig)
		}
	}
}
