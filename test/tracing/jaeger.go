// Package tracing runs a real Jaeger for tests and reads traces back from
// its HTTP query API. Its own test proves that a message's trace, from the
// producer's span through every delivery attempt to the sink's HTTP calls,
// arrives in Jaeger as one trace.
//
// Jaeger is built from the tools/ module by scripts/tools.sh (once, then
// cached) and started with the checked-in tools/jaeger/config.yaml, its
// ports moved to free ones so tests and a developer's own Jaeger coexist.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

// StartupTimeout bounds how long Start waits for Jaeger to report healthy.
const StartupTimeout = 30 * time.Second

// startAttempts is how often Start tries to launch Jaeger: a free port
// picked by the test can be taken by someone else before Jaeger binds it.
const startAttempts = 3

// Jaeger is a running Jaeger, stopped when the test that started it ends.
type Jaeger struct {
	// OTLPHTTP is the host:port of the OTLP/HTTP receiver (traces are
	// posted to http://OTLPHTTP/v1/traces).
	OTLPHTTP string
	// QueryURL is the base URL of the query UI and HTTP API.
	QueryURL string
}

// Start builds Jaeger if its build is stale, runs it on free 127.0.0.1
// ports and waits until it is healthy. When the binary has never been built
// it skips the test, or fails it when the CI environment variable is set
// (CI=true, as CI services set it): CI builds the tools before the tests
// and must not skip silently.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	root := repoRoot(t)
	bin := jaegerBinary(t, root)
	config := filepath.Join(root, "tools", "jaeger", "config.yaml")
	var lastErr error
	for range startAttempts {
		j, err := launch(t, bin, config)
		if err == nil {
			return j
		}
		lastErr = err
	}
	t.Fatalf("jaeger: %v", lastErr)
	return nil
}

// jaegerBinary returns the path of the built Jaeger, refreshing a stale
// build through scripts/tools.sh.
func jaegerBinary(t testing.TB, root string) string {
	t.Helper()
	script := filepath.Join(root, "scripts", "tools.sh")
	out, err := exec.Command(script, "path", "jaeger").Output()
	if err != nil {
		t.Fatalf("jaeger: %s path jaeger: %v", script, err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err != nil {
		testenv.SkipOrFail(t, fmt.Sprintf("jaeger is not built (%v); run `scripts/tools.sh build jaeger` once (it takes minutes)", err))
	}
	// Up to date: returns at once. After a change to tools/go.mod it
	// rebuilds, so the test never runs a Jaeger other than the pinned one.
	if out, err := exec.Command(script, "build", "jaeger").CombinedOutput(); err != nil {
		t.Fatalf("jaeger: %s build jaeger: %v\n%s", script, err, out)
	}
	return bin
}

// launch starts one Jaeger process with the checked-in config and every
// listener moved to a free port.
func launch(t testing.TB, bin, config string) (*Jaeger, error) {
	t.Helper()
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	j := &Jaeger{OTLPHTTP: addr(0), QueryURL: "http://" + addr(1)}
	health := "http://" + addr(2) + "/status"
	args := []string{
		"--config", "file:" + config,
		"--set=receivers.otlp.protocols.http.endpoint=" + addr(0),
		"--set=extensions.jaeger_query.http.endpoint=" + addr(1),
		"--set=extensions.healthcheckv2.http.endpoint=" + addr(2),
		"--set=receivers.otlp.protocols.grpc.endpoint=" + addr(3),
		"--set=extensions.jaeger_query.grpc.endpoint=" + addr(4),
	}
	cmd := exec.Command(bin, args...)
	// The process writes straight into the file: no copying goroutines.
	logs, err := os.CreateTemp(t.TempDir(), "jaeger-*.log")
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	output := func() string {
		b, _ := os.ReadFile(logs.Name())
		return string(b)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	if err := waitHealthy(health, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w; its output:\n%s", err, output())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("jaeger output:\n%s", output())
		}
	})
	return j, nil
}

// waitHealthy polls Jaeger's health endpoint until it answers 200, the
// process exits, or StartupTimeout passes.
func waitHealthy(url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(StartupTimeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("jaeger exited before it became healthy")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jaeger not healthy at %s after %s", url, StartupTimeout)
		}
	}
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		// Held open until all are picked, so the kernel hands out n
		// different ones.
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// repoRoot finds the root module's directory above the working directory
// (go test runs in the package's directory).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "tools.sh")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("jaeger: no scripts/tools.sh above the working directory")
		}
		dir = parent
	}
}

// Trace fetches one trace from Jaeger's HTTP API; found is false while
// Jaeger does not know it yet.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (tr Trace, found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.QueryURL+"/api/traces/"+traceID, nil)
	if err != nil {
		return Trace{}, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Trace{}, false, fmt.Errorf("jaeger: get trace %s: %w", traceID, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return Trace{}, false, nil
	default:
		return Trace{}, false, fmt.Errorf("jaeger: get trace %s: %s", traceID, resp.Status)
	}
	traces, err := DecodeTraces(resp.Body)
	if err != nil || len(traces) == 0 {
		return Trace{}, false, err
	}
	return traces[0], true, nil
}
