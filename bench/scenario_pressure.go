package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/relay"
)

// pressureKind is one pressure of scenario 9 (issue 22, item 4).
type pressureKind int

const (
	pressureHeldXID   pressureKind = iota // (a) BEGIN; SELECT txid_current(); then idle
	pressureReaders                       // (b) REPEATABLE READ readers scanning the hot tables
	pressureOverload                      // (c) offered load at overloadFactor × capacity
	pressureTerminate                     // (d) pg_terminate_backend of relay connections
	pressureIdleConns                     // (e) idleConnCount idle connections
)

// The pressures' shapes.
const (
	readerCount = 4
	// readerHold is how long one reader's REPEATABLE READ transaction
	// keeps scanning before it commits and takes a new snapshot: the
	// readers start readerHold/readerCount apart, so some snapshot a few
	// seconds old is always held, as analytics queries hold them.
	readerHold     = 5 * time.Second
	overloadFactor = 1.5
	// terminateEvery is how often one of the relays' connections (chosen
	// at random) is terminated: five a second.
	terminateEvery = 200 * time.Millisecond
	idleConnCount  = 300
	// recoveryTarget is how soon after the pressure ends pickup latency
	// must be back (targets (a) and (b)).
	recoveryTarget = 60 * time.Second
	sampleEvery    = 250 * time.Millisecond
	// drainStall ends the wait for a backlog that stopped shrinking: a
	// job River's relay lost with its connection waits for River's
	// rescuer (an hour by default), and the run should report it lost.
	drainStall = 30 * time.Second
)

var pressureTitles = map[pressureKind]string{
	pressureHeldXID:   "a transaction holding an XID open (`BEGIN; SELECT txid_current();`, then idle)",
	pressureReaders:   fmt.Sprintf("%d REPEATABLE READ readers scanning the hot tables in a loop (%s per snapshot)", readerCount, readerHold),
	pressureOverload:  fmt.Sprintf("offered load at %.1f× the relays' capacity", overloadFactor),
	pressureTerminate: fmt.Sprintf("`pg_terminate_backend` of one of the relays' connections every %s", terminateEvery),
	pressureIdleConns: fmt.Sprintf("%d idle connections held against the database", idleConnCount),
}

// phaseNames are the three phases of every pressure scenario.
var phaseNames = [3]string{"clean", "pressure", "recovery"}

// pressureOutcome is one system's run of a pressure scenario.
type pressureOutcome struct {
	sys      system
	phases   [3]phaseFigures
	capacity float64 // overload only
	recovery time.Duration
	// recovered is false when pickup latency was not back within the
	// recovery phase.
	recovered bool
	drain     time.Duration // from the pressure's end until the backlog was back to its clean depth
	drained   bool
	enqueued  int
	missing   int
	unknown   int
	dups      int
	exits     []string
	stop      time.Duration
	note      string // what the pressure did (scans, terminations...)
}

// phaseFigures are one phase's figures.
type phaseFigures struct {
	offered, delivered float64 // msg/s
	p50, p99           float64 // pickup (commit to first delivery), ms
	depthMax, deadMax  int64
	cpu                cpuSplit
}

func (f phaseFigures) completion() float64 { return f.delivered / f.offered }

// pressure returns the scenario of kind k: each system once (or -runs
// times), clean -> pressure -> recovery, each phase -phase long, two relays
// under a steady load of -rate msg/s.
func (b *bench) pressure(k pressureKind) func(context.Context) error {
	return func(ctx context.Context) error {
		outs, err := eachSystem(b, b.sz.pressureRuns, func(sys system) (pressureOutcome, error) {
			return b.pressureRun(ctx, k, sys)
		})
		if err != nil {
			return err
		}
		b.res.sections = append(b.res.sections, b.pressureSection(k, outs))
		return nil
	}
}

func (b *bench) pressureRun(ctx context.Context, k pressureKind, sys system) (pressureOutcome, error) {
	out := pressureOutcome{sys: sys}
	s := b.store(sys)
	clean, peak := b.sz.pressureRate, b.sz.pressureRate
	if k == pressureOverload {
		c, err := b.capacity(ctx, sys)
		if err != nil {
			return out, err
		}
		out.capacity, peak = c, int(c*overloadFactor)
	}
	if err := s.reset(ctx); err != nil {
		return out, err
	}
	tables, err := s.hotTables(ctx)
	if err != nil {
		return out, err
	}
	phase := b.sz.phase
	expect := int((2*float64(clean) + float64(peak)) * phase.Seconds() * 1.2)
	var commits []commit
	var marks [4]int64 // clean, pressure, recovery starts; recovery end
	var cpuMarks [4]cpuMark
	var samples []sample
	var drainedAt int64
	r, err := b.drive(relayOpts{sys: sys, count: b.sz.pressureRelays, expect: expect, tolerateExits: true}, func(procs []*relayProc, _ int64) error {
		time.Sleep(min(latencySettle, phase))
		pr := startProducers(ctx, s, clean, true)
		sm := startSampler(ctx, s, tables, func() int64 { return pr.produced.Load() - delivered(procs) }, sampleEvery)
		stopAll := func() {
			_, _ = pr.stop()
			_, _ = sm.stop()
		}
		marks[0], cpuMarks[0] = time.Now().UnixNano(), markCPU(procs)
		time.Sleep(phase)
		marks[1], cpuMarks[1] = time.Now().UnixNano(), markCPU(procs)
		release, err := b.applyPressure(ctx, k, sys, s, pr, peak, tables)
		if err != nil {
			stopAll()
			return fmt.Errorf("apply the pressure: %w", err)
		}
		time.Sleep(phase)
		out.note, err = release()
		marks[2], cpuMarks[2] = time.Now().UnixNano(), markCPU(procs)
		if err != nil {
			stopAll()
			return fmt.Errorf("release the pressure: %w", err)
		}
		time.Sleep(phase)
		marks[3], cpuMarks[3] = time.Now().UnixNano(), markCPU(procs)
		commits, err = pr.stop()
		if err != nil {
			_, _ = sm.stop()
			return fmt.Errorf("producers: %w", err)
		}
		if _, err := waitDrained(ctx, s, procs, len(commits), b.sz.drain); err != nil {
			_, _ = sm.stop()
			return err
		}
		drainedAt = time.Now().UnixNano()
		samples, err = sm.stop()
		return err
	})
	if err != nil {
		return out, err
	}
	first, count := r.firstDeliveries()
	lat := func(from, to int64) []float64 {
		var xs []float64
		for _, c := range commits {
			if t, ok := first[c.ID]; ok && c.Ns >= from && c.Ns < to {
				xs = append(xs, ms(t-c.Ns))
			}
		}
		return xs
	}
	for i := range out.phases {
		from, to := marks[i], marks[i+1]
		secs := float64(to-from) / float64(time.Second)
		var offered, done int
		for _, c := range commits {
			if c.Ns >= from && c.Ns < to {
				offered++
			}
		}
		for _, t := range first {
			if t >= from && t < to {
				done++
			}
		}
		in := between(samples, from, to)
		l := lat(from, to)
		out.phases[i] = phaseFigures{
			offered: float64(offered) / secs, delivered: float64(done) / secs,
			p50: percentile(l, 50), p99: percentile(l, 99),
			depthMax: maxOf(in, func(s sample) int64 { return s.Depth }),
			deadMax:  maxOf(in, func(s sample) int64 { return s.Dead }),
			cpu:      splitCPU(cpuMarks[i], cpuMarks[i+1], done),
		}
	}
	for i, name := range phaseNames {
		stmts := r.statements(marks[i], marks[i+1])
		claims := claimDurations(stmts)
		b.logf("    %s: claims p50 %.2f, p99 %.2f, max %.2f ms; %s", name,
			percentile(claims, 50), percentile(claims, 99), percentile(claims, 100), stmtSummary(stmts))
	}
	out.recovery, out.recovered = recoveryTime(lat, marks[2], marks[3], out.phases[0].p99)
	out.drain, out.drained = drainTime(samples, marks[2], drainedAt, out.phases[0].depthMax)
	ids := idsOf(commits)
	out.enqueued = len(ids)
	out.missing, out.unknown = r.lost(ids)
	for _, c := range count {
		if c > 1 {
			out.dups++
		}
	}
	out.exits, out.stop = r.exits, time.Duration(r.stopNs)
	p := out.phases
	b.logf("    completion %.2f → %.2f → %.2f, p99 %.1f → %.1f → %.1f ms, %d missing, %d exits",
		p[0].completion(), p[1].completion(), p[2].completion(), p[0].p99, p[1].p99, p[2].p99, out.missing, len(out.exits))
	return out, nil
}

// applyPressure starts pressure k on sys's database and returns how to end
// it; ending it says what the pressure did.
func (b *bench) applyPressure(ctx context.Context, k pressureKind, sys system, s store, pr *producers, peak int, tables []string) (func() (string, error), error) {
	url := b.dbURL(sys.database())
	switch k {
	case pressureHeldXID:
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return nil, err
		}
		var xid int64
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			conn.Close(ctx)
			return nil, err
		}
		if err := conn.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
			conn.Close(ctx)
			return nil, err
		}
		return func() (string, error) {
			_, err := conn.Exec(ctx, "ROLLBACK")
			conn.Close(ctx)
			return fmt.Sprintf("XID %d held for the pressure phase", xid), err
		}, nil
	case pressureReaders:
		return startReaders(ctx, url, tables), nil
	case pressureOverload:
		pr.setRate(peak)
		return func() (string, error) {
			pr.setRate(b.sz.pressureRate)
			return fmt.Sprintf("offered %d msg/s during the pressure phase", peak), nil
		}, nil
	case pressureTerminate:
		return b.startTerminating(ctx, sys.database()), nil
	case pressureIdleConns:
		var conns []*pgx.Conn
		closeAll := func() {
			for _, c := range conns {
				c.Close(ctx)
			}
		}
		for range idleConnCount {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("idle connection %d: %w", len(conns)+1, err)
			}
			conns = append(conns, c)
		}
		return func() (string, error) {
			closeAll()
			return fmt.Sprintf("%d connections held", len(conns)), nil
		}, nil
	}
	return nil, fmt.Errorf("unknown pressure %d", k)
}

// startReaders starts readerCount readers, each on a connection of its
// own, and returns how to stop them.
func startReaders(ctx context.Context, url string, tables []string) func() (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var scans atomic.Int64
	errs := make(chan error, readerCount)
	for i := range readerCount {
		wg.Go(func() {
			if !sleepCtx(ctx, time.Duration(i)*readerHold/readerCount) {
				return
			}
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				errs <- stopped(ctx, err)
				return
			}
			defer conn.Close(context.Background())
			for ctx.Err() == nil {
				if err := readOnce(ctx, conn, tables, &scans); err != nil {
					errs <- stopped(ctx, err)
					return
				}
			}
		})
	}
	return func() (string, error) {
		cancel()
		wg.Wait()
		close(errs)
		var err error
		for e := range errs {
			if e != nil && err == nil {
				err = e
			}
		}
		return fmt.Sprintf("%d table scans by %d readers", scans.Load(), readerCount), err
	}
}

// readOnce is one reader's REPEATABLE READ transaction: it scans every
// table, again and again, for readerHold.
func readOnce(ctx context.Context, conn *pgx.Conn, tables []string, scans *atomic.Int64) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	until := time.Now().Add(readerHold)
	for time.Now().Before(until) {
		for _, t := range tables {
			var n int64
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n); err != nil {
				return err
			}
			scans.Add(1)
		}
	}
	return tx.Commit(ctx)
}

// startTerminating terminates one of the relays' connections to db every
// terminateEvery, until stopped.
func (b *bench) startTerminating(ctx context.Context, db string) func() (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	var killed atomic.Int64
	done := make(chan error, 1)
	go func() {
		for sleepCtx(ctx, terminateEvery) {
			var n int64
			err := b.admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (
				SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 ORDER BY random() LIMIT 1) victim`,
				db, relayAppName).Scan(&n)
			if err != nil {
				done <- stopped(ctx, err)
				return
			}
			killed.Add(n)
		}
		done <- nil
	}()
	return func() (string, error) {
		cancel()
		err := <-done
		return fmt.Sprintf("%d relay connections terminated", killed.Load()), err
	}
}

// waitDrained waits until want messages were delivered and the engine's
// table holds nothing undelivered. It gives up after timeout, or once
// deliveries stalled for drainStall, and then reports false.
func waitDrained(ctx context.Context, s store, procs []*relayProc, want int, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	last, lastAt := int64(-1), time.Now()
	for time.Now().Before(deadline) && time.Since(lastAt) < drainStall {
		n := delivered(procs)
		if n != last {
			last, lastAt = n, time.Now()
		}
		if n >= int64(want) {
			left, err := s.unfinished(ctx)
			if err != nil {
				return false, err
			}
			if left == 0 {
				return true, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false, nil
}

// recoveryTime is how long after from the pickup latency was back: the
// start of the first bucket (a second, or a tenth of the phase) from which
// on every bucket's p99 is within 2× the clean p99. ok is false when the
// last bucket still was not.
func recoveryTime(lat func(from, to int64) []float64, from, to int64, cleanP99 float64) (time.Duration, bool) {
	w := min(time.Second.Nanoseconds(), (to-from)/10)
	if w <= 0 {
		return 0, false
	}
	recoveredAt := int64(-1)
	for at := from; at+w <= to; at += w {
		xs := lat(at, at+w)
		if len(xs) == 0 {
			continue
		}
		if percentile(xs, 99) <= 2*cleanP99 {
			if recoveredAt < 0 {
				recoveredAt = at
			}
		} else {
			recoveredAt = -1
		}
	}
	if recoveredAt < 0 {
		return time.Duration(to - from), false
	}
	return time.Duration(recoveredAt - from), true
}

// drainTime is how long after from the sampled depth was first back at
// (or below) twice the clean phase's largest (plus a little, for noise).
func drainTime(samples []sample, from, to int64, cleanDepth int64) (time.Duration, bool) {
	for _, s := range between(samples, from, to+1) {
		if s.Depth <= 2*cleanDepth+10 {
			return time.Duration(s.Ns - from), true
		}
	}
	return time.Duration(to - from), false
}

// pressureSection renders a pressure scenario's phases and targets.
func (b *bench) pressureSection(k pressureKind, outs []pressureOutcome) string {
	var w strings.Builder
	fmt.Fprintf(&w, "### %s: %s\n\n", pressureScenarioName(k), pressureTitles[k])
	fmt.Fprintf(&w, "Relays per system: %d; producers are asked for %d msg/s (single-message transactions on %d connections, batches on %d) throughout, and the table shows what they managed; phases of %s: clean, pressure, recovery. %s\n\n",
		b.sz.pressureRelays, b.sz.pressureRate, singleProducers, batchProducers, b.sz.phase, cpuColumnNote)
	fmt.Fprintln(&w, "| system | phase | offered (msg/s) | delivered (msg/s) | completion | pickup p50 (ms) | pickup p99 (ms) | queue depth max | dead tuples max | CPU: relays per msg; relays/producers/rest |")
	fmt.Fprintln(&w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, o := range outs {
		for i, p := range o.phases {
			fmt.Fprintf(&w, "| %s | %s | %.0f | %.0f | %.1f%% | %.2f | %.2f | %d | %d | %s |\n", o.sys.label, phaseNames[i],
				p.offered, p.delivered, 100*p.completion(), p.p50, p.p99, p.depthMax, p.deadMax, p.cpu)
		}
	}
	fmt.Fprintln(&w)
	fmt.Fprintln(&w, "| system | target | measured | verdict |")
	fmt.Fprintln(&w, "|---|---|---|---|")
	for _, o := range outs {
		row := func(target, measured string, ok bool) {
			fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", o.sys.label, target, measured, passFail(ok))
		}
		c, p := o.phases[0], o.phases[1]
		switch k {
		case pressureHeldXID, pressureReaders:
			ratio := p.completion() / c.completion()
			row("completion under pressure ≥ 90% of clean", fmt.Sprintf("%.0f%% of clean", 100*ratio), ratio >= 0.9)
			row("pickup p99 under pressure ≤ 2× clean", fmt.Sprintf("%.2f×", p.p99/c.p99), p.p99 <= 2*c.p99)
			row(fmt.Sprintf("pickup p99 back within 2× clean within %s", recoveryTarget), recoveryText(o.recovery, o.recovered),
				o.recovered && o.recovery <= recoveryTarget)
		case pressureOverload:
			row("delivered under pressure ≥ capacity", fmt.Sprintf("%.0f of %.0f msg/s (%.2f×)", p.delivered, o.capacity, p.delivered/o.capacity),
				p.delivered >= o.capacity)
			row("backlog drains after", recoveryText(o.drain, o.drained), o.drained)
		}
		row("no relay exits", fmt.Sprintf("%d", len(o.exits)), len(o.exits) == 0)
		row("nothing lost", fmt.Sprintf("%d of %d never delivered, %d unknown, %d delivered twice", o.missing, o.enqueued, o.unknown, o.dups),
			o.missing == 0 && o.unknown == 0)
		row(fmt.Sprintf("clean shutdown within the drain timeout (%s)", relay.DefaultShutdownTimeout), fmt.Sprintf("%.2f s", o.stop.Seconds()),
			o.stop <= relay.DefaultShutdownTimeout)
	}
	fmt.Fprintln(&w)
	for _, o := range outs {
		fmt.Fprintf(&w, "- %s: %s", o.sys.label, o.note)
		if len(o.exits) > 0 {
			fmt.Fprintf(&w, "; first exit: %s", o.exits[0])
		}
		fmt.Fprintln(&w)
	}
	return w.String()
}

func recoveryText(d time.Duration, ok bool) string {
	if !ok {
		return fmt.Sprintf("not within %.0f s", d.Seconds())
	}
	return fmt.Sprintf("after %.1f s", d.Seconds())
}

// pressureScenarioName is the -only name of kind k.
func pressureScenarioName(k pressureKind) string {
	return map[pressureKind]string{
		pressureHeldXID: "pressure-xid", pressureReaders: "pressure-readers", pressureOverload: "pressure-overload",
		pressureTerminate: "pressure-terminate", pressureIdleConns: "pressure-conns",
	}[k]
}
