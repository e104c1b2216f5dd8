package cmd_test

import (
	"bufio"
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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testrelay"
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
		binary = filepath.Join(binDir, "outboxd")
		out, err := exec.Command("go", "build", "-o", binary, "./outboxd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build outboxd: %v\n%s", err, out)
		}
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
	e.config = filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// command returns an outboxd command with this env's configuration.
func (e *env) command(args ...string) *exec.Cmd {
	c := exec.Command(outboxdBinary(e.t), append([]string{"--config", e.config}, args...)...)
	c.Env = append(cleanEnviron(), e.extra...)
	return c
}

// cleanEnviron drops variables that would override the test's
// configuration (the developer's own OUTBOX_* and DATABASE_URL).
func cleanEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OUTBOX_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// run runs outboxd to completion and returns stdout, stderr and exit code.
func (e *env) run(stdin io.Reader, args ...string) (string, string, int) {
	e.t.Helper()
	c := e.command(args...)
	var out, errOut bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = stdin, &out, &errOut
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run outboxd %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
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
type server struct {
	cmd  *exec.Cmd
	addr string // the HTTP API's address
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

// serve starts `outboxd serve --log-format json`, waits until its HTTP API
// listens, and stops it with SIGTERM when the test ends.
func (e *env) serve() *server {
	e.t.Helper()
	s := &server{cmd: e.command("serve", "--log-format", "json"), done: make(chan error, 1)}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http api listening" {
				addr <- rec.Addr
			}
		}
		s.done <- s.cmd.Wait()
	}()
	select {
	case s.addr = <-addr:
	case err := <-s.done:
		e.t.Fatalf("outboxd serve exited early (%v):\n%s", err, s.Logs())
	case <-time.After(30 * time.Second):
		e.t.Fatalf("outboxd serve did not listen within 30s:\n%s", s.Logs())
	}
	e.t.Cleanup(func() { s.stop(e.t) })
	return s
}

// Logs returns what the server logged so far.
func (s *server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("outboxd serve exited with %v after SIGTERM:\n%s", err, s.Logs())
		}
	case <-time.After(45 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("outboxd serve did not stop within 45s of SIGTERM:\n%s", s.Logs())
	}
}

// url returns the address of an API path.
func (s *server) url(path string) string { return "http://" + s.addr + path }

// receiver is an httptest webhook endpoint that records deliveries by
// webhook-id and answers 400 (a permanent failure) to payloads holding
// "poison".
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	count map[string]int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{count: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if bytes.Contains(body, []byte("poison")) {
			http.Error(w, "poisoned payload", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.count[req.Header.Get("webhook-id")]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
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

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testrelay.WaitFor(t, timeout, what, cond)
}

// stats runs `outboxd stats --json`.
func (e *env) stats() map[string]map[string]float64 {
	e.t.Helper()
	var report struct{ Sinks map[string]map[string]float64 }
	if err := json.Unmarshal([]byte(e.mustRun("stats", "--json")), &report); err != nil {
		e.t.Fatal(err)
	}
	return report.Sinks
}
