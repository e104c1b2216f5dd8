package main

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
)

// childEnv marks a process as a relay child: the parent re-executes its own
// binary (or test binary) with it set, so relays run in processes whose
// memory and CPU can be measured on their own.
const childEnv = "OUTBOXD_BENCH_RELAY"

// Lines of the parent/child protocol on the child's stdin and stdout.
const (
	msgReady    = "ready"
	msgGo       = "go"
	msgStop     = "stop"
	msgProgress = "n" // followed by the number of deliveries so far
)

// progressEvery is how often a child reports its delivery count. The
// counts only tell the parent when to stop waiting (rates and latencies
// come from the recorded delivery times), so it is coarse: every wake-up of
// the harness competes with the relays for the same two cores.
const progressEvery = 10 * time.Millisecond

// childReport is what a relay child leaves in its -out file.
type childReport struct {
	StartNs    int64 // when the relay was started (after "go")
	Deliveries []delivery
	Stmts      []stmtSample
	// Exited is the error of a relay that stopped before it was told to
	// ("" when it ran until then): the pressure scenarios count such exits.
	Exited string
}

// relayFlags are the child's arguments. batch and concurrency exist for
// experiments only (-relay-batch on the parent); the table always runs
// outboxd with relay.Config's zero values.
type relayFlags struct {
	system      string
	url         string
	out         string
	expect      int
	cpuprofile  string
	batch       int
	concurrency int
	asyncCommit bool
	deleteSent  bool
	retention   time.Duration // outboxd SentRetention, River CompletedJobRetentionPeriod (0: defaults)
	pausedSink  bool          // also configure pausedSinkName (paused by the parent) besides noopSink
	countOnly   bool          // count deliveries without recording them (long soaks)
}

// relayAppName is the application_name of every relay child's connections,
// so that a scenario can find them in pg_stat_activity (and terminate them).
const relayAppName = "outboxd-bench-relay"

// childMain runs one relay (outboxd or a River client) until told to stop.
func childMain(args []string) error {
	var f relayFlags
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.StringVar(&f.system, "system", "", "outboxd, river-tuned or river-default")
	fs.StringVar(&f.url, "url", "", "database URL")
	fs.StringVar(&f.out, "out", "", "report file")
	fs.IntVar(&f.expect, "expect", 0, "expected deliveries (preallocation)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the relay to this file")
	fs.IntVar(&f.batch, "batch", 0, "outboxd BatchSize (experiments only)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "outboxd Concurrency (experiments only)")
	fs.BoolVar(&f.deleteSent, "delete-on-sent", false, "outboxd DeleteOnSent (experiments only)")
	fs.BoolVar(&f.asyncCommit, "async-commit", false, "synchronous_commit=off on the relay's connections (experiments only)")
	fs.DurationVar(&f.retention, "retention", 0, "how long delivered rows are kept (0: the system's default)")
	fs.BoolVar(&f.pausedSink, "paused-sink", false, "also configure the sinks (River: queue) "+pausedSinkName+" and "+throttledSinkName+" (River: not worked)")
	fs.BoolVar(&f.countOnly, "count-only", false, "count deliveries without recording each")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sys, ok := systemByName(f.system)
	if !ok {
		return fmt.Errorf("relay: unknown system %q", f.system)
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(f.url)
	if err != nil {
		return fmt.Errorf("relay: parse url: %w", err)
	}
	tracer := newStmtTracer()
	cfg.ConnConfig.Tracer = tracer
	cfg.ConnConfig.RuntimeParams["application_name"] = relayAppName
	if f.asyncCommit || sys.bare {
		// The bare loop commits as the relay does: its terminal writes
		// asynchronously, its claims durably (see bareClaim).
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("relay: connect: %w", err)
	}
	defer pool.Close()
	rec := newRecorder(f.expect)
	rec.countOnly = f.countOnly
	var early earlyExit
	start, stop, err := newRunner(pool, sys, f, rec, &early)
	if err != nil {
		return err
	}

	in := bufio.NewScanner(os.Stdin)
	fmt.Println(msgReady)
	if !in.Scan() || in.Text() != msgGo {
		return errors.New("relay: parent went away before go")
	}
	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err != nil {
			return fmt.Errorf("relay: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("relay: cpu profile: %w", err)
		}
	}
	report := childReport{StartNs: time.Now().UnixNano()}
	if err := start(); err != nil {
		return err
	}
	progressDone := make(chan struct{})
	go reportProgress(rec, progressDone)
	for in.Scan() && in.Text() != msgStop {
	}
	close(progressDone)
	stopErr := stop()
	if f.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	report.Deliveries = rec.all()
	report.Stmts = tracer.snapshot()
	if report.Exited = early.get(); report.Exited != "" {
		// The report carries the failure; the parent decides what it means.
		stopErr = nil
	}
	if err := writeReport(f.out, report); err != nil {
		return err
	}
	return stopErr
}

// earlyExit remembers why a relay stopped before it was told to.
type earlyExit struct {
	mu  sync.Mutex
	err string
}

func (e *earlyExit) set(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == "" {
		e.err = fmt.Sprint("relay stopped on its own: ", err)
	}
}

func (e *earlyExit) get() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// newRunner builds the relay of sys and returns how to start and stop it.
func newRunner(pool *pgxpool.Pool, sys system, f relayFlags, rec *recorder, early *earlyExit) (start, stop func() error, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	if sys.bare {
		done := make(chan error, 1)
		start = func() error { go func() { done <- bareLoop(ctx, pool, rec) }(); return nil }
		stop = func() error { cancel(); return <-done }
		return start, stop, nil
	}
	if !sys.river {
		record := sink.Func(func(_ context.Context, d *sink.Delivery) error { rec.add(d.ID); return nil })
		sinks := []relay.SinkConfig{{Name: noopSink, Sink: record}}
		if f.pausedSink {
			// The throttled sink's one permit an hour goes to a sink that
			// records nothing: its row is none of the measurement's.
			discard := sink.Func(func(context.Context, *sink.Delivery) error { return nil })
			sinks = append(sinks, relay.SinkConfig{Name: pausedSinkName, Sink: record},
				relay.SinkConfig{Name: throttledSinkName, Sink: discard, RateLimit: &throttledRate})
		}
		ob, err := outboxd.New(pool, outboxd.Options{})
		if err != nil {
			cancel()
			return nil, nil, err
		}
		relay, err := ob.NewRelay(relay.Config{
			Sinks:         sinks,
			BatchSize:     f.batch,
			Concurrency:   f.concurrency,
			DeleteOnSent:  f.deleteSent,
			SentRetention: f.retention,
			Logger:        quietLogger(),
		})
		if err != nil {
			cancel()
			return nil, nil, fmt.Errorf("relay: %w", err)
		}
		done := make(chan error, 1)
		start = func() error {
			go func() {
				err := relay.Run(ctx)
				if ctx.Err() == nil {
					early.set(err)
				}
				done <- err
			}()
			return nil
		}
		stop = func() error { cancel(); return <-done }
		return start, stop, nil
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{rec: rec})
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: sys.workers}}
	if f.pausedSink {
		queues[pausedSinkName] = river.QueueConfig{MaxWorkers: sys.workers}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		CompletedJobRetentionPeriod: f.retention,
		FetchCooldown:               sys.fetch,
		FetchPollInterval:           sys.poll,
		Queues:                      queues,
		Workers:                     workers,
		Logger:                      quietLogger(),
	})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("relay: river client: %w", err)
	}
	var stopping atomic.Bool
	start = func() error {
		if err := client.Start(ctx); err != nil {
			return err
		}
		go func() {
			<-client.Stopped()
			if !stopping.Load() {
				early.set(errors.New("river client stopped"))
			}
		}()
		return nil
	}
	stop = func() error {
		stopping.Store(true)
		defer cancel()
		return client.Stop(context.Background())
	}
	return start, stop, nil
}

func reportProgress(rec *recorder, done <-chan struct{}) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if n := rec.count(); n != last {
				fmt.Println(msgProgress, n)
				last = n
			}
		}
	}
}

func writeReport(path string, r childReport) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("relay: report: %w", err)
	}
	if err := gob.NewEncoder(f).Encode(r); err != nil {
		f.Close()
		return fmt.Errorf("relay: report: %w", err)
	}
	return f.Close()
}

// Compile-time check that the tracer fits pgx.
var _ pgx.QueryTracer = (*stmtTracer)(nil)
