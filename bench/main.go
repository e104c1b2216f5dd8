// Command bench runs outboxd and River (riverpgxv5) side by side on the same
// PostgreSQL and prints one Markdown table of medians and ratios. See
// docs/performance.md for the scenarios and the latest results.
//
// Usage, from this folder:
//
//	go run . [-quick] [-only burndown,latency,...] [-systems outboxd,river-tuned,river-default]
//
// It uses DATABASE_URL, or the local server with trust auth, and creates
// (and afterwards drops) the databases bench_outboxd and bench_river. A
// second run on the same server waits until the first is done.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
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
	only := fs.String("only", "", "comma-separated scenarios: burndown,latency,enqueue,steady,history,idle,brokers,events")
	systems := fs.String("systems", "", "comma-separated systems: outboxd,river-tuned,river-default")
	o := options{log: stderr}
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of outboxd's relay (1-relay burn-down) to this file")
	fs.IntVar(&o.relayBatch, "relay-batch", 0, "experiments only: outboxd BatchSize (0: default)")
	fs.IntVar(&o.relayConcurrency, "relay-concurrency", 0, "experiments only: outboxd Concurrency (0: default)")
	fs.BoolVar(&o.relayAsyncCommit, "relay-async-commit", false, "experiments only: synchronous_commit=off on outboxd's relay connections")
	fs.BoolVar(&o.relayDeleteSent, "relay-delete-on-sent", false, "experiments only: outboxd DeleteOnSent")
	fs.BoolVar(&o.keep, "keep", false, "keep the benchmark databases afterwards")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.sz = fullSizes
	if *quick {
		o.sz = quickSizes
	}
	if *runs > 0 {
		o.sz.runs, o.sz.steadyFullRuns = *runs, *runs
	}
	if *only != "" {
		o.scenarios = strings.Split(*only, ",")
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

// runBench runs the benchmark and prints the table to out; it reports
// whether every scenario succeeded.
func runBench(ctx context.Context, dbURL string, o options, out io.Writer) bool {
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
	b.res.print(out)
	return ok
}
