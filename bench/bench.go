package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultDatabaseURL is used when DATABASE_URL is not set: the local server
// with trust auth.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// storePoolSize bounds the parent's connections per engine database: enough
// for enqueueConns producers plus a few queries.
const storePoolSize = enqueueConns + 2

// options are the benchmark's command-line choices.
type options struct {
	sz sizes
	// serverData is the private cluster's data directory ("" on a shared
	// server): the cost scenario reads the server's CPU time through it.
	serverData       string
	scenarios        []string
	systems          []system
	cpuprofile       string  // CPU profile of outboxd's relay in the 1-relay burn-down
	relayBatch       int     // experiments only: outboxd BatchSize
	relayConcurrency int     // experiments only: outboxd Concurrency
	relayAsyncCommit bool    // experiments only: synchronous_commit=off on outboxd's relay connections
	relayDeleteSent  bool    // experiments only: outboxd DeleteOnSent
	keep             bool    // keep the benchmark databases afterwards
	payload          int     // payload bytes of every enqueued message (0: the smallest, {"n":…})
	private          bool    // run on a private cluster even when no selected scenario needs one
	capacity         float64 // msg/s the relays deliver, instead of measuring it (0: measure)
	log              io.Writer
}

// runLockKey is the session advisory lock a run holds on the server from
// before it creates its databases until after it drops them. Every run uses
// the same two databases (and would skew another's timings anyway), so a
// second run waits for the first instead of dropping its databases.
const runLockKey int64 = 0x6f7574626f7864 // "outboxd"

// bench is one benchmark session: its databases, stores and results.
type bench struct {
	options
	base   *url.URL
	admin  *pgxpool.Pool
	lock   *pgxpool.Conn    // holds runLockKey
	stores map[string]store // by system name; River's systems share one database
	tmp    string
	res    *results
	// capacities caches capacity's burn-downs, by system name.
	capacities map[string]float64
}

func newBench(ctx context.Context, rawURL string, o options) (*bench, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	b := &bench{options: o, base: u, stores: map[string]store{}, res: newResults(), capacities: map[string]float64{}}
	if b.tmp, err = os.MkdirTemp("", "outboxd-bench-"); err != nil {
		return nil, err
	}
	if b.admin, err = pgxpool.New(ctx, rawURL); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if b.lock, err = b.waitForOtherRuns(ctx); err != nil {
		b.admin.Close()
		_ = os.RemoveAll(b.tmp)
		return nil, err
	}
	for _, db := range []string{dbOutboxd, dbRiver} {
		if err := b.recreateDatabase(ctx, db); err != nil {
			b.close(ctx)
			return nil, err
		}
	}
	return b, nil
}

// waitForOtherRuns takes runLockKey on a connection of its own, saying so
// in the log when another run holds it.
func (b *bench) waitForOtherRuns(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := b.admin.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	var free bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", runLockKey).Scan(&free); err != nil {
		conn.Release()
		return nil, fmt.Errorf("take the run lock: %w", err)
	}
	if !free {
		b.logf("another benchmark run is using %s and %s on this server; waiting for it to finish", dbOutboxd, dbRiver)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", runLockKey); err != nil {
			conn.Release()
			return nil, fmt.Errorf("wait for the other benchmark run: %w", err)
		}
	}
	return conn, nil
}

// dbURL is the base URL pointed at another database.
func (b *bench) dbURL(db string) string {
	u := *b.base
	u.Path = "/" + db
	return u.String()
}

func (b *bench) recreateDatabase(ctx context.Context, db string) error {
	ident := pgx.Identifier{db}.Sanitize()
	if _, err := b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop %s: %w", db, err)
	}
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("create %s: %w", db, err)
	}
	cfg, err := pgxpool.ParseConfig(b.dbURL(db))
	if err != nil {
		return err
	}
	cfg.MaxConns = storePoolSize
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect %s: %w", db, err)
	}
	if db == dbOutboxd {
		if err := migrateOutboxd(ctx, p); err != nil {
			return fmt.Errorf("migrate outboxd: %w", err)
		}
		b.stores[sysOutboxd.name] = outboxdStore{p: p, pad: padding(b.payload)}
		return nil
	}
	if err := migrateRiver(ctx, p); err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	// Each River system inserts through a client configured like its
	// workers: River limits insert notifications to one per queue per
	// FetchCooldown of the inserting client, so a default client would
	// hold the tuned workers' wake-ups back to one per 100 ms.
	for _, sys := range allSystems {
		if sys.river {
			s, err := newRiverStore(p, sys, padding(b.payload))
			if err != nil {
				return err
			}
			b.stores[sys.name] = s
		}
	}
	return nil
}

// store is sys's database; the bare loop works on outboxd's.
func (b *bench) store(sys system) store {
	if sys.bare {
		return b.stores[sysOutboxd.name]
	}
	return b.stores[sys.name]
}

func (b *bench) close(ctx context.Context) {
	for _, s := range b.stores {
		s.pool().Close() // River's systems share a pool; Close is idempotent
	}
	if !b.keep {
		for _, db := range []string{dbOutboxd, dbRiver} {
			_, _ = b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
		}
	}
	// Closing the pool below ends the lock's session, and with it the lock,
	// even when this unlock fails.
	_, _ = b.lock.Exec(ctx, "SELECT pg_advisory_unlock($1)", runLockKey)
	b.lock.Release()
	b.admin.Close()
	_ = os.RemoveAll(b.tmp)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// scenario is one numbered scenario of the issue; run does all its runs.
// A private one runs only on a private cluster: it holds transactions open,
// terminates backends, opens hundreds of connections or needs autovacuum
// as production runs it.
type scenario struct {
	name    string
	run     func(ctx context.Context) error
	private bool
}

// pressureGroup selects every pressure-* scenario in -only.
const pressureGroup = "pressure"

func (b *bench) scenarioList() []scenario {
	return []scenario{
		{name: "burndown", run: b.runBurnDown},
		{name: "latency", run: b.runLatency},
		{name: "latency-load", run: b.runLatencyLoad},
		{name: "enqueue", run: b.runEnqueue},
		{name: "steady", run: b.runSteady},
		{name: "history", run: b.runHistory},
		{name: "idle", run: b.runIdle},
		{name: "brokers", run: b.runBrokers},
		{name: "events", run: b.runEvents},
		{name: "destinations", run: b.runDestinations},
		{name: "publish-filters", run: b.runPublishFilters},
		{name: "claims-waiting", run: b.runClaimsWaiting, private: true},
		{name: "burndown-beside", run: b.runBurnDownBeside, private: true},
		{name: "stepped", run: b.runStepped, private: true},
		{name: pressureScenarioName(pressureHeldXID), run: b.pressure(pressureHeldXID), private: true},
		{name: pressureScenarioName(pressureReaders), run: b.pressure(pressureReaders), private: true},
		{name: pressureScenarioName(pressureOverload), run: b.pressure(pressureOverload), private: true},
		{name: pressureScenarioName(pressureTerminate), run: b.pressure(pressureTerminate), private: true},
		{name: pressureScenarioName(pressureIdleConns), run: b.pressure(pressureIdleConns), private: true},
		{name: "soak", run: b.runSoak, private: true},
		{name: "cost", run: b.runCost, private: true},
	}
}

// scenarioNames lists every scenario in run order.
func scenarioNames() []string {
	var names []string
	for _, s := range (&bench{}).scenarioList() {
		names = append(names, s.name)
	}
	return names
}

// selected says whether -only picks the scenario (no -only: the scenarios
// that run on any server; the private ones are asked for by name).
func (o options) selected(s scenario) bool {
	if len(o.scenarios) == 0 {
		return !s.private
	}
	return slices.Contains(o.scenarios, s.name) ||
		(slices.Contains(o.scenarios, pressureGroup) && strings.HasPrefix(s.name, pressureGroup+"-"))
}

// needsPrivateCluster says whether a selected scenario must run on a
// private cluster.
func (o options) needsPrivateCluster() bool {
	for _, s := range (&bench{}).scenarioList() {
		if s.private && o.selected(s) {
			return true
		}
	}
	return false
}

// run runs the selected scenarios (memory comes with the burn-down). A
// failed scenario is noted and the others still run; run reports whether
// all succeeded.
func (b *bench) run(ctx context.Context) bool {
	ok := true
	for _, s := range b.scenarioList() {
		if !b.selected(s) {
			continue
		}
		b.logf("scenario %s", s.name)
		if err := s.run(ctx); err != nil {
			ok = false
			b.res.note("%s FAILED: %v", s.name, err)
			b.logf("scenario %s failed: %v", s.name, err)
		}
	}
	return ok
}

// rotated returns the systems in the order of run number i: each run starts
// with the next one, so drift over time hits every system alike.
func rotated[T any](xs []T, i int) []T {
	if len(xs) == 0 {
		return nil
	}
	i %= len(xs)
	return append(slices.Clone(xs[i:]), xs[:i]...)
}

// eachRun calls fn for every run and system, alternating the order.
func (b *bench) eachRun(runs int, systems []system, fn func(run int, sys system) error) error {
	for run := range runs {
		for _, sys := range rotated(systems, run) {
			b.logf("  run %d %s", run+1, sys.name)
			if err := fn(run, sys); err != nil {
				return fmt.Errorf("%s run %d: %w", sys.name, run+1, err)
			}
		}
	}
	return nil
}

// eachSystem runs fn for every system (runs times, alternating the order)
// and gathers its outcomes, for scenarios that print a section of their
// own rather than metrics.
func eachSystem[T any](b *bench, runs int, fn func(sys system) (T, error)) ([]T, error) {
	var outs []T
	err := b.eachRun(runs, b.systems, func(_ int, sys system) error {
		o, err := fn(sys)
		if err != nil {
			return err
		}
		outs = append(outs, o)
		return nil
	})
	return outs, err
}
