package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMain lets the test binary serve as a relay child, the way the bench
// binary re-executes itself.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := childMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestQuickBurnDown runs the quick burn-down of outboxd and River tuned end
// to end (databases, relay children, verification, table), so the benchmark
// code cannot rot unnoticed. It fails when a message is not delivered.
func TestQuickBurnDown(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	o, err := parseFlags([]string{"-quick", "-only", "burndown", "-systems", "outboxd,river-tuned"})
	if err != nil {
		t.Fatal(err)
	}
	o.sz.burnDown = 500
	var log, out bytes.Buffer
	o.log = &log
	if !runBench(context.Background(), databaseURL(), o, &out) {
		t.Fatalf("benchmark failed:\n%s\n%s", out.String(), log.String())
	}
	for _, want := range []string{"| 1 burn-down | 1 relay (msg/s) |", "| 7 memory |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// Every system that ran, the bare loop beside outboxd included, has a
	// value in each burn-down row.
	for line := range strings.SplitSeq(out.String(), "\n") {
		if !strings.HasPrefix(line, "| 1 burn-down |") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, col := range []int{3, 4, 6} { // outboxd, River tuned, bare loop
			if strings.TrimSpace(cells[col]) == "–" {
				t.Errorf("a system has no result in %q:\n%s", line, out.String())
			}
		}
	}
}

func TestRotatedAlternatesOrder(t *testing.T) {
	xs := []string{"a", "b", "c"}
	for i, want := range []string{"abc", "bca", "cab", "abc"} {
		if got := strings.Join(rotated(xs, i), ""); got != want {
			t.Errorf("rotated(%v, %d) = %s, want %s", xs, i, got, want)
		}
	}
}

func TestStmtKind(t *testing.T) {
	for sql, want := range map[string]string{
		"-- name: JobGetAvailable :many\nWITH locked_jobs AS (":     "JobGetAvailable",
		"-- name: claim\n-- Claims up to $1 rows\nWITH picked AS (": "claim",
		"-- name: finish\nWITH f AS (":                              "finish",
		"SELECT pg_try_advisory_lock($1, hashtext($2) # $3)":        "SELECT pg_try_advisory_lock($1, hashtext($2)",
	} {
		if got := stmtKind(sql); got != want {
			t.Errorf("stmtKind(%q) = %q, want %q", sql, got, want)
		}
	}
}

func Example_median() {
	fmt.Println(median([]float64{3, 1, 2}), median([]float64{4, 1, 3, 2}))
	fmt.Println(percentile([]float64{5, 1, 4, 2, 3}, 50), percentile([]float64{5, 1, 4, 2, 3}, 100))
	// Output:
	// 2 2.5
	// 3 5
}

// TestQuickBrokers runs the broker scenario small (outboxd into JetStream
// and RabbitMQ against bare publisher loops), so its code cannot rot
// unnoticed. It needs the machine's NATS and RabbitMQ; .ci/run starts them.
func TestQuickBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL, NATS and RabbitMQ")
	}
	quickRun(t, []string{"-only", "brokers"}, "JetStream: outboxd ÷ bare sync", "RabbitMQ: outboxd ÷ bare sync")
}

// TestQuickEvents runs the events scenario with small counts, so that it
// cannot rot unnoticed.
func TestQuickEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	quickRun(t, []string{"-only", "events", "-systems", "outboxd"},
		"9 events, 3 target(s), PublishBatch, batches of 100 events (events/s)", "3 target(s): publish ÷ enqueue")
}

// quickRun runs the benchmark with -quick and args and fails the test
// unless it succeeds and its results hold every one of wants.
func quickRun(t *testing.T, args []string, wants ...string) {
	t.Helper()
	o, err := parseFlags(append([]string{"-quick"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	var log, out bytes.Buffer
	o.log = &log
	if !runBench(context.Background(), databaseURL(), o, &out) {
		t.Fatalf("benchmark failed:\n%s\n%s", out.String(), log.String())
	}
	for _, want := range wants {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the results lack %q:\n%s", want, out.String())
		}
	}
}

// TestSecondRunWaitsForTheFirst: while another run holds the bench
// databases, a run says it waits and creates nothing; it goes on once the
// other is done. (Mutation: no run lock: the run drops and recreates the
// databases at once and never says it waits.)
func TestSecondRunWaitsForTheFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	const timeout = 30 * time.Second
	ctx := context.Background()
	first, err := pgx.Connect(ctx, databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	if _, err := first.Exec(ctx, "SELECT pg_advisory_lock($1)", runLockKey); err != nil {
		t.Fatal(err)
	}

	logs, logWriter := io.Pipe()
	defer logWriter.Close()
	waiting := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(logs)
		said := false
		for lines.Scan() {
			if !said && strings.Contains(lines.Text(), "waiting for it to finish") {
				said = true
				close(waiting)
			}
		}
	}()
	o, err := parseFlags([]string{"-quick"})
	if err != nil {
		t.Fatal(err)
	}
	o.log = logWriter
	started := make(chan error, 1)
	var second *bench
	go func() {
		var err error
		second, err = newBench(ctx, databaseURL(), o)
		started <- err
	}()

	select {
	case <-waiting:
	case err := <-started:
		t.Fatalf("the second run started (err %v) while the first held the lock", err)
	case <-time.After(timeout):
		t.Fatalf("the second run did not say it waits within %s", timeout)
	}
	if _, err := first.Exec(ctx, "SELECT pg_advisory_unlock($1)", runLockKey); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("the second run failed after the first finished: %v", err)
		}
		second.close(ctx)
	case <-time.After(timeout):
		t.Fatalf("the second run did not start within %s of the first finishing", timeout)
	}
}
