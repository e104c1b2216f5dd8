package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// runBurnDown is scenario 1 (and 7, the relay's peak RSS): a backlog already
// enqueued, a no-op sink, 1 and 2 relays; every message verified delivered.
func (b *bench) runBurnDown(ctx context.Context) error {
	systems := b.systems
	if slices.Contains(systems, sysOutboxd) {
		systems = append(slices.Clone(systems), sysBare)
	}
	for _, relays := range []int{1, 2} {
		err := b.eachRun(b.sz.runs, systems, func(run int, sys system) error {
			return b.burnDown(ctx, sys, relays)
		})
		if err != nil {
			return err
		}
	}
	if b.sz.burnDownDefault != b.sz.burnDown {
		b.res.note("River defaults burns down %d jobs instead of %d: at ~1k jobs/s per client the full count would take minutes; the rate is steady, so it is comparable.",
			b.sz.burnDownDefault, b.sz.burnDown)
	}
	return nil
}

func (b *bench) burnDown(ctx context.Context, sys system, relays int) error {
	profile := ""
	if relays == 1 && sys == sysOutboxd {
		profile = b.cpuprofile
	}
	n := backlogFor(sys, b.sz.burnDown, b.sz.burnDownDefault)
	if b.payload > 0 {
		n = min(n, max(1000, maxBacklogBytes/b.payload))
	}
	bd, err := b.burnDownOnce(ctx, relayOpts{sys: sys, count: relays, profile: profile}, n)
	if err != nil {
		return err
	}
	b.res.add(map[int]metric{1: mBurn1, 2: mBurn2}[relays], sys.name, bd.rate)
	b.res.add(map[int]metric{1: mWAL1, 2: mWAL2}[relays], sys.name, bd.walPerMsg)
	if relays == 1 && !sys.bare {
		b.res.add(mRSS, sys.name, float64(bd.run.peakRSS)/(1<<20))
	}
	r := bd.run
	b.res.details[fmt.Sprintf("burn-down %d relay(s), %s", relays, sys.name)] = fmt.Sprintf(
		"%d msgs, %.0f msg/s, %d duplicates; relay CPU %.1f µs/msg, %.0f%% of the machine's busy time (machine %.0f%% busy); WAL %.0f B/msg (whole server); %s",
		bd.n, bd.rate, bd.dups, cpuMicrosPerMsg(r.relayCPU, bd.n), pct(r.relayCPU, r.busyCPU), pct(r.busyCPU, r.totalCPU), bd.walPerMsg,
		stmtSummary(r.statements(0, 0)))
	b.logf("    %.0f msg/s, %d dups, rss %.1f MB, relay CPU %.1f µs/msg", bd.rate, bd.dups, float64(r.peakRSS)/(1<<20), cpuMicrosPerMsg(r.relayCPU, bd.n))
	return nil
}

// burnDownResult is one verified burn-down.
type burnDownResult struct {
	n         int
	rate      float64 // msg/s
	walPerMsg float64 // bytes
	dups      int
	run       relayRun
	// serverTicks is the server's CPU time while the relays delivered,
	// in clock ticks, on a private cluster (see serverCPUTicks); 0 on a
	// shared server.
	serverTicks int64
}

// burnDownOnce empties the table of o.sys, enqueues n messages, lets
// o.count relay children (started as o says) deliver them and checks
// every one was.
func (b *bench) burnDownOnce(ctx context.Context, o relayOpts, n int) (burnDownResult, error) {
	bd := burnDownResult{n: n}
	s := b.store(o.sys)
	if err := s.reset(ctx); err != nil {
		return bd, err
	}
	if err := enqueueBacklog(ctx, s, n); err != nil {
		return bd, err
	}
	ids, err := allIDs(ctx, s)
	if err != nil {
		return bd, err
	}
	wal0, err := b.walPosition(ctx)
	if err != nil {
		return bd, err
	}
	o.expect = n
	bd.run, err = b.drive(o, func(procs []*relayProc, _ int64) error {
		if b.serverData == "" {
			return waitDelivered(procs, n, b.sz.drain)
		}
		// Read while the relays' connections are open: a backend's CPU
		// time leaves /proc with it.
		t0, err := serverCPUTicks(b.serverData)
		if err != nil {
			return err
		}
		if err := waitDelivered(procs, n, b.sz.drain); err != nil {
			return err
		}
		t1, err := serverCPUTicks(b.serverData)
		bd.serverTicks = t1 - t0
		return err
	})
	if err != nil {
		return bd, err
	}
	wal1, err := b.walPosition(ctx)
	if err != nil {
		return bd, err
	}
	if bd.dups, err = bd.run.verify(ids); err != nil {
		return bd, err
	}
	left, err := s.unfinished(ctx)
	if err != nil {
		return bd, err
	}
	if left > 0 {
		return bd, fmt.Errorf("verification failed: %d rows not marked delivered after the relays stopped", left)
	}
	bd.rate = perSecond(n, bd.run.lastDeliveryNs()-bd.run.goNs)
	bd.walPerMsg = float64(wal1-wal0) / float64(n)
	return bd, nil
}

// capacity is the msg/s the pressure scenarios' relays of sys (-relays) deliver in a burn-down
// (or -capacity): the yardstick of the overload and stepped scenarios.
func (b *bench) capacity(ctx context.Context, sys system) (float64, error) {
	if b.options.capacity > 0 {
		return b.options.capacity, nil
	}
	if c, ok := b.capacities[sys.name]; ok {
		return c, nil
	}
	b.logf("  %s: capacity, a burn-down of %d messages with %d relays", sys.name, b.sz.capacityBacklog, b.sz.pressureRelays)
	bd, err := b.burnDownOnce(ctx, relayOpts{sys: sys, count: b.sz.pressureRelays}, b.sz.capacityBacklog)
	if err != nil {
		return 0, fmt.Errorf("capacity: %w", err)
	}
	b.logf("    capacity %.0f msg/s", bd.rate)
	b.capacities[sys.name] = bd.rate
	return bd.rate, nil
}

// maxBacklogBytes bounds a burn-down's payload bytes under -payload:
// 100,000 messages of 64 KiB would be a 6.5 GB table; a rate needs far
// fewer to be steady.
const maxBacklogBytes = 1 << 30

// backlogFor picks the backlog size of sys: River with its defaults gets
// the smaller one, since it works about 1k jobs/s per client.
func backlogFor(sys system, n, riverDefault int) int {
	if sys == sysRiverDefault {
		return riverDefault
	}
	return n
}

// cpuMicrosPerMsg is CPU ticks spent on n messages, in microseconds per
// message.
func cpuMicrosPerMsg(ticks int64, n int) float64 {
	return float64(ticks) * 1e6 / clockTicksPerSecond / float64(n)
}

func pct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// allIDs lists the ids of every row of the engine's table.
func allIDs(ctx context.Context, s store) ([]int64, error) {
	rows, err := s.pool().Query(ctx, "SELECT id FROM "+s.table())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// walPosition is the server's current WAL position in bytes. The server may
// be shared, so differences are an upper bound for the benchmark's WAL.
func (b *bench) walPosition(ctx context.Context) (int64, error) {
	var n int64
	err := b.admin.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&n)
	return n, err
}
