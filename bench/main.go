// Command bench runs outboxd and River (riverpgxv5) side by side on the same
// PostgreSQL and prints one Markdown table of medians and ratios. See
// docs/performance.md for the scenarios and the latest results.
//
// Usage, from this folder:
//
//	go run . [-quick] [-only burndown,latency,...] [-systems outboxd,river-tuned,river-default]
//	go run . -only pressure -systems outboxd,river-tuned [-phase 30s] [-rate 2000]
//	go run . -only stepped|claims-waiting|soak -systems outboxd,river-tuned [-duration 30m] [-retention 5m]
//	go run . -only burndown-beside   # outboxd only: burn-down beside a paused and an unconfigured backlog
//	go run . -only latency,latency-load -systems outboxd,river-tuned
//	go run . -only cost -systems outboxd,river-tuned   # needs valgrind (callgrind)
//	go run . -only burndown,latency -payload 64KiB
//	go run . -only destinations   # 10,000 destinations over 1,000 tenants (outboxd only)
//
// It uses DATABASE_URL, or the local server with trust auth, and creates
// (and afterwards drops) the databases bench_outboxd and bench_river. A
// second run on the same server waits until the first is done. The
// pressure, stepped, claims-waiting, burndown-beside, soak and cost scenarios (asked for
// by name; a run without -only leaves them out) run on a private cluster the
// run creates and removes (initdb from OUTBOXD_PG_BIN, default
// /usr/lib/postgresql/15/bin), with autovacuum on.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// stderr receives progress and both systems' warnings, so stdout holds only
// the table.
var stderr io.Writer = os.Stderr

func main() {
	if os.Getenv(childEnv) != "" {
		if err := childMain(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !runBench(context.Background(), databaseURL(), o, os.Stdout) {
		os.Exit(1)
	}
}

func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "small counts and 1 run (CI smoke test)")
	runs := fs.Int("runs", 0, "runs per scenario (default 3, or 1 with -quick)")
	only := fs.String("only", "", "comma-separated scenarios: "+strings.Join(scenarioNames(), ",")+" (pressure: all pressure-*)")
	systems := fs.String("systems", "", "comma-separated systems: outboxd,river-tuned,river-default")
	o := options{log: stderr}
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of outboxd's relay (1-relay burn-down) to this file")
	fs.IntVar(&o.relayBatch, "relay-batch", 0, "experiments only: outboxd BatchSize (0: default)")
	fs.IntVar(&o.relayConcurrency, "relay-concurrency", 0, "experiments only: outboxd Concurrency (0: default)")
	fs.BoolVar(&o.relayAsyncCommit, "relay-async-commit", false, "experiments only: synchronous_commit=off on outboxd's relay connections")
	fs.BoolVar(&o.relayDeleteSent, "relay-delete-on-sent", false, "experiments only: outboxd DeleteOnSent")
	fs.BoolVar(&o.keep, "keep", false, "keep the benchmark databases afterwards")
	fs.BoolVar(&o.private, "private", false, "run on a private PostgreSQL cluster (always so for the pressure, stepped, claims-waiting and soak scenarios)")
	payload := fs.String("payload", "", "payload size of every message: bytes, or with KiB (4KiB, 64KiB); default the smallest, {\"n\":…}")
	duration := fs.Duration("duration", 0, "soak: how long producers write (default 30m, 3s with -quick)")
	phase := fs.Duration("phase", 0, "pressure scenarios: length of each phase (clean, pressure, recovery); stepped: of each step")
	rate := fs.Int("rate", 0, "offered msg/s of the pressure scenarios' clean load and of the soak")
	relays := fs.Int("relays", 0, fmt.Sprintf("relays per system in the pressure and stepped scenarios and their capacity burn-down (default %d)", steadyRelays))
	retention := fs.Duration("retention", 0, "soak: how long delivered rows are kept (default 5m)")
	fs.Float64Var(&o.capacity, "capacity", 0, "overload and stepped: the relays' capacity in msg/s instead of measuring it by a burn-down")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.sz = fullSizes
	if *quick {
		o.sz = quickSizes
	}
	var err error
	if o.payload, err = parseBytes(*payload); err != nil {
		return o, fmt.Errorf("-payload: %w", err)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		to   *time.Duration
	}{{"-duration", *duration, &o.sz.soakDuration}, {"-phase", *phase, &o.sz.phase}, {"-retention", *retention, &o.sz.soakRetention}} {
		if d.v < 0 {
			return o, fmt.Errorf("%s must not be negative, got %s", d.flag, d.v)
		}
		if d.v > 0 {
			*d.to = d.v
		}
	}
	if *rate < 0 || o.capacity < 0 || *relays < 0 {
		return o, fmt.Errorf("-rate, -relays and -capacity must not be negative")
	}
	if *relays > 0 {
		o.sz.pressureRelays = *relays
	}
	if *rate > 0 {
		o.sz.pressureRate, o.sz.soakRate = *rate, *rate
	}
	if *runs > 0 {
		o.sz.runs, o.sz.steadyFullRuns, o.sz.pressureRuns = *runs, *runs, *runs
	}
	if *only != "" {
		o.scenarios = strings.Split(*only, ",")
		for _, name := range o.scenarios {
			if !slices.Contains(scenarioNames(), name) && name != pressureGroup {
				return o, fmt.Errorf("-only: unknown scenario %q", name)
			}
		}
	}
	o.systems = allSystems
	if *systems != "" {
		o.systems = nil
		for _, name := range strings.Split(*systems, ",") {
			s, ok := systemByName(name)
			if !ok {
				return o, fmt.Errorf("unknown system %q", name)
			}
			o.systems = append(o.systems, s)
		}
	}
	return o, nil
}

// parseBytes reads a size: a number of bytes, or of KiB with that suffix.
func parseBytes(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	num, mult := v, 1
	if n, ok := strings.CutSuffix(v, "KiB"); ok {
		num, mult = n, 1<<10
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (bytes, or KiB: 4KiB)", v)
	}
	return n * mult, nil
}

// runBench runs the benchmark and prints the table to out; it reports
// whether every scenario succeeded.
func runBench(ctx context.Context, dbURL string, o options, out io.Writer) bool {
	if o.private || o.needsPrivateCluster() {
		c, err := startPrivateCluster(func(f string, a ...any) { fmt.Fprintf(o.log, f+"\n", a...) })
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return false
		}
		defer c.stop()
		dbURL, o.serverData = c.url(), c.dataDir()
	}
	b, err := newBench(ctx, dbURL, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return false
	}
	defer b.close(ctx)
	ok := b.run(ctx)
	if o.relayBatch != 0 || o.relayConcurrency != 0 || o.relayAsyncCommit || o.relayDeleteSent {
		b.res.note("EXPERIMENT: outboxd ran with BatchSize %d, Concurrency %d (0 = default), synchronous_commit off %t, DeleteOnSent %t: not its defaults",
			o.relayBatch, o.relayConcurrency, o.relayAsyncCommit, o.relayDeleteSent)
	}
	if o.payload > 0 {
		b.res.note("Every message carried a payload of about %d bytes (-payload).", o.payload)
	}
	b.res.print(out)
	return ok
}
