// Package proc builds the outboxd binary and runs it as real processes for
// the end-to-end, chaos and fault tests: started, killed with SIGKILL,
// stopped with SIGTERM, their output kept for assertions and failure
// reports.
package proc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

// ListenTimeout bounds how long a starting `outboxd serve` may take to open
// its HTTP API.
const ListenTimeout = 30 * time.Second

// StopTimeout bounds a graceful stop before the process is killed.
const StopTimeout = 30 * time.Second

// Build compiles ./cmd/outboxd of the module this package belongs to into
// dir and returns the binary's path. Like `make build` it stamps the VCS
// revision when it can (-buildvcs=auto, whatever GOFLAGS says), so that
// `outboxd version` shows it.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "outboxd")
	cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "./cmd/outboxd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/outboxd: %w\n%s", err, out)
	}
	return bin, nil
}

// ModuleRoot is the directory of the outboxd module, also from a module
// that replaces it with a local copy (deploy/, bench/).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/outboxd/outboxd").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/outboxd/outboxd: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("the outboxd module has no local directory")
	}
	return dir, nil
}

// MainWithBinary is a TestMain body for packages whose tests run the
// binary: it builds it into a temporary directory, stores its path in *bin,
// runs the tests, removes the directory and exits with the tests' code.
func MainWithBinary(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "outboxd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// RequireTool returns the path of a program the test runs (psql, node,
// promtool). Without it the test fails when CI is set, since CI installs
// every tool (.ci/run), and is skipped elsewhere, with the reason (see
// testenv.SkipOrFail).
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("%s is not installed (.ci/run installs it): %v", name, err))
	}
	return path
}

// PinnedTool builds the tool name pinned in tools/ with scripts/tools.sh
// (once; later calls, and later runs with the same pins, reuse the binary
// in its cache) and returns the binary's path.
func PinnedTool(name string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "tools.sh")
	if out, err := exec.Command(script, "build", name).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s build %s: %w\n%s", script, name, err, out)
	}
	out, err := exec.Command(script, "path", name).Output()
	if err != nil {
		return "", fmt.Errorf("%s path %s: %w", script, name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Environ is the test process's environment without the variables that
// would override a test's configuration (a developer's OUTBOXD_* or
// OUTBOX_*, DATABASE_URL, OTEL_*), plus extra.
func Environ(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OUTBOXD_") || strings.HasPrefix(kv, "OUTBOX_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// Result is the outcome of a command run to completion.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the binary with args to completion.
func Run(ctx context.Context, bin string, env []string, stdin io.Reader, args ...string) (Result, error) {
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = env
	var out, errOut bytes.Buffer
	c.Stdin, c.Stdout, c.Stderr = stdin, &out, &errOut
	err := c.Run()
	r := Result{Stdout: out.String(), Stderr: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		return r, fmt.Errorf("run outboxd %v: %w", args, err)
	}
	return r, nil
}

// Server is a running `outboxd serve`.
type Server struct {
	cmd  *exec.Cmd
	addr string

	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
	err  error
}

// Start starts outboxd with args, for a serve whose HTTP API's address
// the test does not wait for (its "http api listening" line filtered out
// by --log-level warn, say): Logs, Stop and Kill work as for Serve's. The
// process is killed when the test ends if it still runs.
func Start(t testing.TB, bin string, env []string, args ...string) *Server {
	t.Helper()
	s, _ := start(t, bin, env, args...)
	return s
}

// start starts outboxd with args, keeping its stderr, and returns the
// server and where its HTTP API's address arrives once it logs it (JSON
// logs only).
func start(t testing.TB, bin string, env []string, args ...string) (*Server, <-chan string) {
	t.Helper()
	s := &Server{done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = env
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http api listening" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.Kill() })
	return s, addr
}

// Serve starts `outboxd --config config serve --log-format json` and
// waits until its HTTP API listens (it does so before the database is
// reachable). The process is killed when the test ends if it still runs.
func Serve(t testing.TB, bin, config string, env []string) *Server {
	t.Helper()
	s, addr := start(t, bin, env, "--config", config, "serve", "--log-format", "json")
	select {
	case s.addr = <-addr:
	case <-s.done:
		t.Fatalf("outboxd serve exited early (%v):\n%s", s.err, s.Logs())
	case <-time.After(ListenTimeout):
		t.Fatalf("outboxd serve did not listen within %s:\n%s", ListenTimeout, s.Logs())
	}
	return s
}

// Addr is the HTTP API's host:port.
func (s *Server) Addr() string { return s.addr }

// Pid is the process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Logs returns everything the process wrote to stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Exited reports whether the process has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (s *Server) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Stop sends SIGTERM and waits for a graceful exit (killing the process
// after StopTimeout); it returns the process's exit error, nil for 0.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(StopTimeout):
		s.Kill()
		return fmt.Errorf("outboxd serve did not stop within %s of SIGTERM", StopTimeout)
	}
	return s.err
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1. Another
// process could take it before it is bound again; the ephemeral range
// makes that unlikely enough for tests.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
