package docs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// runbookCommandTimeout bounds one runbook command (each is one query or
// one action on a handful of rows; the margin is for a loaded machine).
const runbookCommandTimeout = time.Minute

// runbookFixtureTimeout bounds the wait for the live serve to dead-letter
// the failing sink's first messages (two attempts 100ms apart each).
const runbookFixtureTimeout = 90 * time.Second

// runbookBreakerFailures is the failing sink's consecutive_failures: its
// messages marked runbookDownMark open its breaker after the first ones
// are dead letters, so both are there to show.
const runbookBreakerFailures = 3

// runbookDownMark in a payload makes the failing receiver answer as one
// that is down.
const runbookDownMark = "receiver-down"

// The fixture's names, standing in for the runbook's placeholders.
const (
	runbookSink         = "flaky"  // SINK: configured, its receiver failing, paused by hand
	runbookUnconfigured = "flakey" // UNCONFIGURED_SINK: a producer's typo, paused by hand
	runbookReason       = "runbook test: receiver under repair"
	runbookUser         = "on-call" // the pod's $USER: pauses are by $USER@host
	runbookErrorText    = "500"     // TEXT: in the failing receiver's every error
)

// kubectlExec is `kubectl [flags] exec [flags] deploy/outboxd -- `, the
// part of a runbook command a pod's shell does not see.
var kubectlExec = regexp.MustCompile(`^kubectl\s.*\bexec\s.*?\s--\s+`)

// codeSpan is an inline code span of markdown, which may wrap lines.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// placeholder is a word in capitals: one left after filling in is a
// placeholder the runbook does not document (or the test does not fill).
var placeholder = regexp.MustCompile(`\b[A-Z][A-Z_]+\b`)

// runbookText is docs/runbook.md.
func runbookText(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// runbookCommands returns every outboxd command of docs/runbook.md, in
// the order an on-call engineer reads them: the lines of its `sh` blocks
// and its inline code spans that run outboxd, directly or in a pod through
// `kubectl exec ... --`, with the kubectl part stripped.
func runbookCommands(t *testing.T) []string {
	t.Helper()
	text := runbookText(t)
	var candidates []string
	spans := func(prose string) {
		for _, m := range codeSpan.FindAllStringSubmatch(prose, -1) {
			candidates = append(candidates, strings.Join(strings.Fields(m[1]), " "))
		}
	}
	at := 0
	for _, m := range fence.FindAllStringSubmatchIndex(text, -1) {
		spans(text[at:m[0]])
		if strings.TrimSpace(text[m[2]:m[3]]) == "sh" {
			candidates = append(candidates, strings.Split(text[m[4]:m[5]], "\n")...)
		}
		at = m[1]
	}
	spans(text[at:])
	var cmds []string
	for _, c := range candidates {
		c = kubectlExec.ReplaceAllString(strings.TrimSpace(c), "")
		if strings.HasPrefix(c, "outboxd ") {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// failingReceiver fails every delivery: 503, as a receiver that is down,
// to payloads holding runbookDownMark, which opens the sink's circuit
// breaker; 500 to the others, which spends their attempts (a breaker
// opens on consecutive failures only for a receiver that is down) and
// makes them dead letters.
func failingReceiver(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(runbookDownMark)) {
			http.Error(w, "receiver under repair", http.StatusServiceUnavailable)
			return
		}
		http.Error(w, "receiver rejects the order", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRunbookCommands runs every outboxd command of docs/runbook.md as an
// on-call engineer types it in a pod (`kubectl exec deploy/outboxd --
// outboxd ...`): the real binary, no terminal, no --config but
// OUTBOXD_CONFIG naming the live serve's plugins.yaml, as the Helm chart
// and the manifests set it, and a working directory without one. The
// serve's sink flaky has a failing receiver, dead letters, an open
// breaker, waiting rows and a pause by hand; a producer wrote rows for
// flakey, which no relay has, and someone paused it. Each command, its
// placeholders filled from that fixture, must exit 0 and print an answer,
// with nothing on stderr that reads as an error or a warning (but the
// warning the runbook announces for UNCONFIGURED_SINK's filters). The
// first outputs of `stats`, `stats -o json` and `get ID`, taken while
// the breaker is open and both sinks are paused, must show what the
// runbook says they show.
// (Mutations checked, each failing the test: in the runbook, a misspelled
// flag, `--sinc SINK`, exit 2; the old first command's `--config
// /etc/outboxd/plugins.yaml`, exit 2; `--yes` dropped from `dlq purge
// --all --waiting --sink UNCONFIGURED_SINK`, exit 2, no terminal to ask
// on; an undocumented placeholder, `get NAME`; `stats -o wide` for `stats
// -o json`, no reason shown. In the test, OUTBOXD_CONFIG emptied in the
// pod's environment fails every command, exit 2.)
func TestRunbookCommands(t *testing.T) {
	cmds := runbookCommands(t)
	if len(cmds) < 10 {
		t.Fatalf("found only %d outboxd commands in docs/runbook.md: %q", len(cmds), cmds)
	}
	bin, err := proc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	schema := freshSchema(t)
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	yaml := fmt.Sprintf(`database:
  schema: %s
http:
  listen: 127.0.0.1:%d
sinks:
  %s:
    type: webhook
    max_attempts: 2
    backoff: {initial: 100ms, max: 200ms}
    circuit_breaker: {consecutive_failures: %d}
    options: {url: %q, secret: "whsec_cnVuYm9vay10ZXN0LXNpZ25pbmcta2V5LTMyLWJ5dGVz", allow_private: true}
`, schema, proc.FreePort(t), runbookSink, runbookBreakerFailures, failingReceiver(t))
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// The pod's environment: the Secret's DATABASE_URL and the chart's
	// OUTBOXD_CONFIG, outboxd on PATH.
	env := proc.Environ("PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DATABASE_URL="+testdb.URL(), "OUTBOXD_CONFIG="+config, "USER="+runbookUser)
	ctx := context.Background()
	outboxdCmd := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, runbookCommandTimeout)
		defer cancel()
		r, err := proc.Run(ctx, bin, env, nil, args...)
		if err != nil || r.Code != 0 {
			t.Fatalf("fixture: outboxd %v: exit %d, %v\n%s%s", args, r.Code, err, r.Stdout, r.Stderr)
		}
		return r.Stdout
	}

	outboxdCmd("migrate")
	proc.Serve(t, bin, config, env)
	pool := testdb.Pool(t, 1)
	ob := testdb.Open(t, schema)
	enqueue := func(sink, key string) {
		t.Helper()
		if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: sink, DedupKey: key, Payload: map[string]string{"order": key}}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait, as an operator would watch, until the sink has what the
	// runbook's commands look at: dead letters, then an open breaker.
	type sinkStats struct {
		Dead    int64
		Circuit string
	}
	waitFor := func(what string, cond func(sinkStats) bool) {
		t.Helper()
		for deadline := time.Now().Add(runbookFixtureTimeout); ; time.Sleep(250 * time.Millisecond) { // a poll of cond
			var stats struct{ Sinks map[string]sinkStats }
			if err := json.Unmarshal([]byte(outboxdCmd("stats", "-o", "json")), &stats); err != nil {
				t.Fatal(err)
			}
			if cond(stats.Sinks[runbookSink]) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has no %s after %s: %+v", runbookSink, what, runbookFixtureTimeout, stats.Sinks)
			}
		}
	}
	for i := range 3 {
		enqueue(runbookSink, "dead-"+strconv.Itoa(i))
	}
	waitFor("dead letter", func(s sinkStats) bool { return s.Dead > 0 })
	for i := range runbookBreakerFailures {
		enqueue(runbookSink, runbookDownMark+"-"+strconv.Itoa(i))
	}
	waitFor("open breaker", func(s sinkStats) bool { return s.Circuit != "closed" })
	// ID: a dead letter's, as the operator reads it from dlq list.
	var dead []struct{ ID int64 }
	if err := json.Unmarshal([]byte(outboxdCmd("dlq", "list", "--sink", runbookSink, "-o", "json")), &dead); err != nil || len(dead) == 0 {
		t.Fatalf("dlq list -o json: %v, %d dead letters", err, len(dead))
	}
	outboxdCmd("sinks", "pause", runbookSink, "--reason", runbookReason)
	enqueue(runbookSink, "waiting")
	enqueue(runbookUnconfigured, "typo")
	outboxdCmd("sinks", "pause", runbookUnconfigured, "--reason", runbookReason)

	values := map[string]string{
		"SINK":              runbookSink,
		"UNCONFIGURED_SINK": runbookUnconfigured,
		"ID":                strconv.FormatInt(dead[0].ID, 10),
		"TEXT":              runbookErrorText,
		"REASON":            runbookReason,
	}
	top, _, _ := strings.Cut(runbookText(t), "\n## ")
	for name := range values {
		if !strings.Contains(top, "`"+name+"`") {
			t.Errorf("the placeholder %s is not documented at the top of docs/runbook.md", name)
		}
	}
	// The filter's warning about a sink that is not configured is what
	// the runbook says UNCONFIGURED_SINK's commands print.
	expectedWarning := "Warning: no sink " + runbookUnconfigured + " is configured; did you mean " + runbookSink + "?\n"
	firstOutput := map[string]string{}
	if _, err := os.Stat("plugins.yaml"); !os.IsNotExist(err) {
		t.Fatalf("the commands run in the test's directory, which must hold no plugins.yaml (the configuration comes from OUTBOXD_CONFIG): %v", err)
	}
	for _, doc := range cmds {
		line := placeholder.ReplaceAllStringFunc(doc, func(w string) string {
			if v, ok := values[w]; ok {
				return v
			}
			return w
		})
		if left := placeholder.FindAllString(line, -1); left != nil {
			t.Errorf("%s: placeholders %v are not documented at the top of docs/runbook.md (or not filled by this test)", doc, left)
			continue
		}
		r := runInPod(t, env, line)
		t.Logf("$ %s\n%s%s", line, r.Stdout, r.Stderr)
		if _, ok := firstOutput[line]; !ok {
			firstOutput[line] = r.Stdout
		}
		if strings.Contains(doc, "UNCONFIGURED_SINK") {
			r.Stderr = strings.Replace(r.Stderr, expectedWarning, "", 1)
		}
		switch {
		case r.Code != 0:
			t.Errorf("%s: exit %d, want 0\nstdout: %s\nstderr: %s", line, r.Code, r.Stdout, r.Stderr)
		case strings.TrimSpace(r.Stdout) == "":
			t.Errorf("%s: printed nothing\nstderr: %s", line, r.Stderr)
		case regexp.MustCompile(`(?i)error|warning`).MatchString(r.Stderr):
			t.Errorf("%s: stderr reads as an error or a warning:\n%s", line, r.Stderr)
		}
	}
	// What the runbook's first commands are said to show, shown while the
	// fixture's breaker is open and both sinks are paused.
	for _, claim := range []struct{ line, want string }{
		{"outboxd stats", "NEXT_PROBE"},                    // the open breakers' next probe
		{"outboxd stats", "LAST_FAILURE"},                  // and last failure
		{"outboxd stats", "by hand (" + runbookUser + "@"}, // who paused
		{"outboxd stats -o json", runbookReason},           // and why
		{"outboxd get " + values["ID"], "failed attempts"}, // every failed attempt
	} {
		if out, ok := firstOutput[claim.line]; !ok || !strings.Contains(out, claim.want) {
			t.Errorf("the runbook says `%s` shows %q; it printed:\n%s", claim.line, claim.want, out)
		}
	}
}

// runInPod runs one command line with bash, without a terminal or stdin,
// as `kubectl exec` without -t does, in the test's directory, which holds
// no plugins.yaml.
func runInPod(t *testing.T, env []string, line string) proc.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runbookCommandTimeout)
	defer cancel()
	r, err := proc.Run(ctx, "bash", env, nil, "-c", line)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
