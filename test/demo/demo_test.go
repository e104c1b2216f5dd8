// Package demo_test runs `make demo` (scripts/demo.sh) as a newcomer would,
// one run at a time (runs share the demo schema and its port range),
// and checks that it used the database it was given and delivered
// everything it enqueued.
package demo_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// runDemo runs scripts/demo.sh with databaseURL as $DATABASE_URL and the
// extra environment, and returns its output, failing the test unless it
// exits 0.
func runDemo(t *testing.T, databaseURL string, extra ...string) string {
	t.Helper()
	out, err := demoCommand(databaseURL, extra...).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	return string(out)
}

// demoCommand is scripts/demo.sh with databaseURL as $DATABASE_URL and
// the extra environment, none of the caller's DEMO_ and OUTBOX_ variables.
func demoCommand(databaseURL string, extra ...string) *exec.Cmd {
	cmd := exec.Command("bash", "../../scripts/demo.sh")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "DEMO_") && !strings.HasPrefix(kv, "OUTBOX_") && !strings.HasPrefix(kv, "OUTBOXD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+databaseURL)
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

// TestDemoKeepsRunning: with DEMO_KEEP=1 the demo stays up after its
// tour and prints the console's URL, which answers; SIGTERM then stops it
// cleanly (exit 0).
// (Mutation: demo.sh without its DEMO_KEEP wait fails this test: the
// script ends and the console's URL no longer answers.)
func TestDemoKeepsRunning(t *testing.T) {
	cmd := demoCommand(testdb.URL(), "DEMO_KEEP=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	console := ""
	keeping := false
	scanner := bufio.NewScanner(out)
	for console == "" && scanner.Scan() {
		line := scanner.Text()
		seen.WriteString(line + "\n")
		keeping = keeping || strings.Contains(line, "Keeping the demo running")
		if url, ok := strings.CutPrefix(line, "demo: console at "); ok && keeping {
			console = url
		}
	}
	if console == "" {
		_ = cmd.Process.Kill()
		t.Fatalf("the demo printed no console URL after its tour:\n%s", seen.String())
	}
	resp, err := http.Get(console)
	if err != nil || resp.StatusCode != http.StatusOK {
		_ = cmd.Process.Kill()
		t.Fatalf("the console at %s: %v %v", console, resp, err)
	}
	resp.Body.Close()
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the kept demo after SIGTERM: %v", err)
	}
}

// checkDelivered fails unless the demo's final `outboxd stats` shows every
// sink drained: nothing pending, in progress, failed or dead.
func checkDelivered(t *testing.T, out string) {
	t.Helper()
	_, table, ok := strings.Cut(out, "SINK ")
	if !ok {
		t.Fatalf("no stats table in the demo's output:\n%s", out)
	}
	sinks := 0
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 7 || (f[0] != "audit-log" && f[0] != "partner") { // SINK PENDING IN_PROGRESS FAILED SENT_LAST_HOUR DEAD OLDEST_PENDING CIRCUIT [NOTE]
			continue
		}
		sinks++
		if f[1] != "0" || f[2] != "0" || f[3] != "0" || f[5] != "0" || f[4] == "0" {
			t.Errorf("sink %s not drained (pending, in progress, failed, sent, dead: %v):\n%s", f[0], f[1:6], out)
		}
	}
	if sinks != 2 {
		t.Fatalf("stats list %d of the demo's 2 sinks:\n%s", sinks, out)
	}
}

// TestDemoUsesDatabaseURL: with $DATABASE_URL set to a working server the
// demo says it uses it, starts no cluster of its own, and delivers.
func TestDemoUsesDatabaseURL(t *testing.T) {
	out := runDemo(t, testdb.URL())
	if !strings.Contains(out, "demo: using $DATABASE_URL") || strings.Contains(out, "private") {
		t.Fatalf("the demo did not use $DATABASE_URL:\n%s", out)
	}
	if !strings.Contains(out, "| t") && !strings.Contains(out, " t\n") {
		t.Errorf("the demo's SQL enqueue did not create a row:\n%s", out)
	}
	checkDelivered(t, out)
}

// TestDemoFallsBackFromABrokenDatabaseURL: with $DATABASE_URL pointing where
// nothing listens the demo says so and why, goes on with the local server
// (or, without one, a private cluster), and still delivers.
func TestDemoFallsBackFromABrokenDatabaseURL(t *testing.T) {
	out := runDemo(t, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	if !strings.Contains(out, "demo: $DATABASE_URL does not work: ") {
		t.Fatalf("the demo did not report the broken $DATABASE_URL:\n%s", out)
	}
	if !strings.Contains(out, "demo: using the local PostgreSQL") && !strings.Contains(out, "demo: using a private cluster") {
		t.Fatalf("the demo did not say which database it used:\n%s", out)
	}
	checkDelivered(t, out)
}

// TestDemoPrivateCluster takes the path of a machine whose PostgreSQL is
// down (DEMO_PRIVATE_CLUSTER=1 forces it): the demo starts a throwaway
// cluster of its own, says so, delivers, and stops it.
func TestDemoPrivateCluster(t *testing.T) {
	out := runDemo(t, "", "DEMO_PRIVATE_CLUSTER=1")
	if !strings.Contains(out, "demo: using a private cluster") {
		t.Fatalf("the demo did not say it started a private cluster:\n%s", out)
	}
	checkDelivered(t, out)
}
