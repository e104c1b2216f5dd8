package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// The outboxd binary, built on first use rather than in TestMain: fuzz
// workers run TestMain too, and must not each rebuild the binary.
var (
	buildOnce sync.Once
	binDir    string
	binary    string
	buildErr  error
)

// outboxdBinary builds the binary once per test process and returns its path.
func outboxdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "outboxd-e2e-"); buildErr != nil {
			return
		}
		binary, buildErr = proc.Build(binDir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// webhookSecret signs the test receivers' deliveries.
var webhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("outboxd-e2e-signing-key-32-bytes"))

// env is one test's database, schema and configuration file.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	schema string
	config string
	extra  []string // environment added to every run
}

// newEnv writes a configuration for a fresh schema (dropped at the end)
// whose sinks block is sinks (YAML indented by four spaces under sinks:).
func newEnv(t *testing.T, sinks string, extraYAML string) *env {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	e := &env{t: t, pool: testdb.Pool(t, 2), schema: "e2e_" + hex.EncodeToString(suffix)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := e.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+e.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", e.schema, err)
		}
	})
	e.config = filepath.Join(t.TempDir(), "plugins.yaml")
	e.writeConfig(sinks, extraYAML)
	return e
}

// writeConfig (re)writes the env's configuration file with sinks and
// extraYAML as newEnv describes them.
func (e *env) writeConfig(sinks, extraYAML string) {
	e.t.Helper()
	cfg := fmt.Sprintf(`database:
  url: %s
  schema: %s
relay:
  poll_interval: 100ms
  lease: 10s
http:
  listen: 127.0.0.1:0
%s
sinks:
%s
`, testdb.URL(), e.schema, extraYAML, sinks)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// environ is the environment of this env's outboxd processes.
func (e *env) environ() []string { return proc.Environ(e.extra...) }

// run runs outboxd to completion and returns stdout, stderr and exit code.
func (e *env) run(stdin io.Reader, args ...string) (string, string, int) {
	e.t.Helper()
	r, err := proc.Run(context.Background(), outboxdBinary(e.t), e.environ(), stdin, append([]string{"--config", e.config}, args...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Stdout, r.Stderr, r.Code
}

// mustRun runs outboxd and fails the test unless it exits 0.
func (e *env) mustRun(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.run(nil, args...)
	if code != 0 {
		e.t.Fatalf("outboxd %v exited %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// server is a running `outboxd serve`.
type server struct{ *proc.Server }

// serve starts `outboxd serve --log-format json`, waits until its HTTP API
// listens, and stops it with SIGTERM when the test ends, failing the test
// unless it exits cleanly.
func (e *env) serve() *server {
	e.t.Helper()
	s := &server{proc.Serve(e.t, outboxdBinary(e.t), e.config, e.environ())}
	e.t.Cleanup(func() { s.stop(e.t) })
	// Registered after stop, so run before it: a failing test shows what
	// each server logged up to the failure.
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("outboxd serve at %s logged:\n%s", s.Addr(), s.Logs())
		}
	})
	return s
}

// stop sends SIGTERM and waits for a clean exit; it does nothing if the
// server has already stopped.
func (s *server) stop(t *testing.T) {
	if s.Exited() {
		return
	}
	if err := s.Stop(); err != nil {
		t.Errorf("outboxd serve did not stop cleanly after SIGTERM: %v\n%s", err, s.Logs())
	}
}

// url returns the address of an API path.
func (s *server) url(path string) string { return "http://" + s.Addr() + path }

// receiver is an httptest webhook endpoint that records deliveries by
// webhook-id and answers 400 (a permanent failure) to payloads holding
// "poison" and to the webhook-ids it is told to refuse.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	count   map[string]int
	refused map[string]bool
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{count: map[string]int{}, refused: map[string]bool{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		// webhook-id is the delivery id, "<sink>/<dedup key>": keep the key.
		_, id, _ := strings.Cut(req.Header.Get("webhook-id"), "/")
		r.mu.Lock()
		defer r.mu.Unlock()
		if bytes.Contains(body, []byte("poison")) || r.refused[id] {
			http.Error(w, "poisoned payload", http.StatusBadRequest)
			return
		}
		r.count[id]++
	}))
	t.Cleanup(r.Close)
	return r
}

// refuse makes the receiver answer 400 to webhook-id id (refuse false: no
// more).
func (r *receiver) refuse(id string, refuse bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[id] = refuse
}

// deliveries returns how often webhook-id id was accepted.
func (r *receiver) deliveries(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[id]
}

// received returns how many distinct messages arrived and how many
// deliveries there were in all.
func (r *receiver) received() (distinct, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.count {
		total += n
	}
	return len(r.count), total
}

// webhookSink is the sinks block entry for a webhook sink to r.
func webhookSink(name string, r *receiver) string {
	return fmt.Sprintf("  %s:\n    type: webhook\n    max_attempts: 2\n    backoff: {initial: 100ms, max: 200ms}\n    options: {url: %q, secret: %q, allow_private: true}\n",
		name, r.URL, webhookSecret)
}

// eventually polls cond until it holds or the deadline passes. These tests
// poll: the relay they wait on is `outboxd serve`, another process.

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testrelay.WaitFor(t, timeout, what, cond)
}

// stats runs `outboxd stats --json`.
func (e *env) stats() map[string]map[string]float64 {
	e.t.Helper()
	var report struct{ Sinks map[string]map[string]any }
	if err := json.Unmarshal([]byte(e.mustRun("stats", "--json")), &report); err != nil {
		e.t.Fatal(err)
	}
	counts := map[string]map[string]float64{}
	for sink, fields := range report.Sinks {
		counts[sink] = map[string]float64{}
		for k, v := range fields {
			if n, ok := v.(float64); ok {
				counts[sink][k] = n
			}
		}
	}
	return counts
}
