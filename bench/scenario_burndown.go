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
	s := b.store(sys)
	n := backlogFor(sys, b.sz.burnDown, b.sz.burnDownDefault)
	if err := s.reset(ctx); err != nil {
		return err
	}
	if err := enqueueBacklog(ctx, s, n); err != nil {
		return err
	}
	ids, err := allIDs(ctx, s)
	if err != nil {
		return err
	}
	wal0, err := b.walPosition(ctx)
	if err != nil {
		return err
	}
	opts := relayOpts{sys: sys, count: relays, expect: n}
	if relays == 1 && sys == sysOutboxd {
		opts.profile = b.cpuprofile
	}
	r, err := b.drive(opts, func(procs []*relayProc, _ int64) error {
		return waitDelivered(procs, n, b.sz.drain)
	})
	if err != nil {
		return err
	}
	wal1, err := b.walPosition(ctx)
	if err != nil {
		return err
	}
	dups, err := r.verify(ids)
	if err != nil {
		return err
	}
	left, err := s.unfinished(ctx)
	if err != nil {
		return err
	}
	if left > 0 {
		return fmt.Errorf("verification failed: %d rows not marked delivered after the relays stopped", left)
	}
	rate := perSecond(n, r.lastDeliveryNs()-r.goNs)
	walPerMsg := float64(wal1-wal0) / float64(n)
	b.res.add(map[int]metric{1: mBurn1, 2: mBurn2}[relays], sys.name, rate)
	b.res.add(map[int]metric{1: mWAL1, 2: mWAL2}[relays], sys.name, walPerMsg)
	if relays == 1 && !sys.bare {
		b.res.add(mRSS, sys.name, float64(r.peakRSS)/(1<<20))
	}
	b.res.details[fmt.Sprintf("burn-down %d relay(s), %s", relays, sys.name)] = fmt.Sprintf(
		"%d msgs, %.0f msg/s, %d duplicates; relay CPU %.1f µs/msg, %.0f%% of the machine's busy time (machine %.0f%% busy); WAL %.0f B/msg (whole server); %s",
		n, rate, dups, cpuMicrosPerMsg(r.relayCPU, n), pct(r.relayCPU, r.busyCPU), pct(r.busyCPU, r.totalCPU), walPerMsg,
		stmtSummary(r.statements(0, 0)))
	b.logf("    %.0f msg/s, %d dups, rss %.1f MB, relay CPU %.1f µs/msg", rate, dups, float64(r.peakRSS)/(1<<20), cpuMicrosPerMsg(r.relayCPU, n))
	return nil
}

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
