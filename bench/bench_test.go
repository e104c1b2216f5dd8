package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
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

// TestQuickDestinations runs the destinations scenario at a tiny size
// (300 destinations over 30 tenants, phases of seconds), so that it
// cannot rot unnoticed: every publish made the rows it should (3 per
// fanned-out event), every healthy tenant's row arrived, and the failing
// tenant's rows were not dead-lettered. (Mutation tried: dropping the
// pattern test of fan_out_destinations() in migration 016 fans each event
// out to all 10 of its tenant's destinations; the publish-cost check
// fails the scenario, "100 events made 1000 rows, want 300", and this test.)
func TestQuickDestinations(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	out := quickRun(t, []string{"-only", "destinations", "-systems", "outboxd"},
		"### destinations: 300 destinations over 30 tenants",
		"| publish, fan-out to the tenant's 3 destinations, 300 destinations |",
		"| 300 ÷ 20 |", "| 6 healthy tenants |", "| 6 healthy tenants, again |", "| one tenant's endpoints answer 500 |", "| one tenant's endpoints time out |")
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "| one tenant's endpoints") && !strings.HasSuffix(line, "| PASS |") {
			t.Errorf("the failing tenant's rows were dead-lettered: %s", line)
		}
	}
}

// TestEventSeq reads the event's number out of a destination row's
// delivery id and refuses any other id. (Mutation tried: testing the
// fourth part, the route, for the key's prefix instead of the third
// refuses every id and fails this test.)
func TestEventSeq(t *testing.T) {
	if n, err := eventSeq("customers/order.created/e42/orders/dst_abc"); err != nil || n != 42 {
		t.Errorf("eventSeq = %d, %v; want 42", n, err)
	}
	for _, id := range []string{"", "hook/plain.created/e1/plain", "customers/order.created/x42/orders/dst_abc"} {
		if _, err := eventSeq(id); err == nil {
			t.Errorf("eventSeq(%q) took an id that is not a destination row's", id)
		}
	}
}

// quickRun runs the benchmark with -quick and args and fails the test
// unless it succeeds and its results hold every one of wants; it returns
// the results.
func quickRun(t *testing.T, args []string, wants ...string) string {
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
	return out.String()
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

// TestQuickPressure runs two of the private-cluster scenarios small for
// outboxd: terminated relay connections (phases of a second) and claims
// beside waiting rows, so their wiring (private cluster, producers,
// sampler, phases, targets) cannot rot unnoticed. (Mutation: relay
// children without their application_name: no connection is terminated
// and the note says 0.)
func TestQuickPressure(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL's server binaries")
	}
	out := quickRun(t, []string{"-only", "pressure-terminate,claims-waiting", "-systems", "outboxd"},
		"### pressure-terminate:", "| outboxd | no relay exits | 0 | PASS |", "### claims-waiting:",
		"| 8 claims beside waiting rows | beside/empty |")
	if !regexp.MustCompile(`outboxd: [1-9][0-9]* relay connections terminated`).MatchString(out) {
		t.Errorf("no relay connection was terminated:\n%s", out)
	}
	if !regexp.MustCompile(`\| outboxd \| nothing lost \| 0 of \d+ never delivered, 0 unknown, \d+ delivered twice \| PASS \|`).MatchString(out) {
		t.Errorf("a message was lost or unknown:\n%s", out)
	}
}

// TestScenarioSelection: a run without -only leaves out the scenarios
// that need a private cluster, "pressure" picks all five pressure-*
// scenarios, and an unknown name is refused. (Mutation: selected true for
// private scenarios without -only: the default run would hold XIDs on the
// shared server.)
func TestScenarioSelection(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.needsPrivateCluster() {
		t.Error("the default run selects a private-cluster scenario")
	}
	o, err = parseFlags([]string{"-only", "pressure"})
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	for _, s := range (&bench{}).scenarioList() {
		if o.selected(s) {
			picked = append(picked, s.name)
		}
	}
	if want := "pressure-xid,pressure-readers,pressure-overload,pressure-terminate,pressure-conns"; strings.Join(picked, ",") != want {
		t.Errorf("-only pressure picks %v, want %s", picked, want)
	}
	if !o.needsPrivateCluster() {
		t.Error("-only pressure does not ask for a private cluster")
	}
	if _, err := parseFlags([]string{"-only", "pressure-nope"}); err == nil || !strings.Contains(err.Error(), `"pressure-nope"`) {
		t.Errorf("an unknown scenario gives %v", err)
	}
	for v, want := range map[string]int{"": 0, "4096": 4096, "4KiB": 4096, "64KiB": 65536} {
		if got, err := parseBytes(v); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	if _, err := parseFlags([]string{"-payload", "4MB"}); err == nil || !strings.Contains(err.Error(), "-payload") {
		t.Errorf("-payload 4MB gives %v", err)
	}
}

// TestRecoveryTime: recovery starts at the first bucket from which on
// every bucket is within 2× the clean p99; a bad bucket after a good one
// moves it. (Mutation: a bad bucket does not reset the start: 1 s instead
// of 3 s.)
func TestRecoveryTime(t *testing.T) {
	sec := time.Second.Nanoseconds()
	// One latency per second of a 10 s recovery phase: 5 ms in seconds 0
	// and 2, 1 ms otherwise; the clean p99 was 1 ms.
	lat := func(from, _ int64) []float64 {
		if s := from / sec; s == 0 || s == 2 {
			return []float64{5}
		}
		return []float64{1}
	}
	d, ok := recoveryTime(lat, 0, 10*sec, 1)
	if !ok || d != 3*time.Second {
		t.Errorf("recoveryTime = %s, %t; want 3s, true", d, ok)
	}
	if _, ok := recoveryTime(func(int64, int64) []float64 { return []float64{5} }, 0, 10*sec, 1); ok {
		t.Error("never back, yet recovered")
	}
}

// TestQuickBurnDownBeside runs the burn-down beside waiting rows small, so
// its wiring (the waiting rows, the pause, two relays with every service,
// the index reads, the ratio) cannot rot unnoticed. (Mutation: the
// scenario without its pause of the paused sink: the relays deliver the
// waiting rows too and the run fails its verification.)
func TestQuickBurnDownBeside(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL's server binaries")
	}
	quickRun(t, []string{"-only", "burndown-beside", "-systems", "outboxd"},
		"### burndown-beside: 2 relays burn down", "| median |", "Target: beside ≥ 0.9× alone:")
}
