package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// waitingTarget is issue 22's bound (item 2): beside the waiting rows, the
// active sink's claims cost at most this many times what they cost on an
// empty table.
const waitingTarget = 1.2

// runClaimsWaiting is scenario 8: the claims of an active sink on an empty
// table, then beside waitingRows waiting rows of a paused sink, as many of
// a throttled sink and as many of a sink no relay is configured for (River:
// a paused queue and two queues no client works), all older than the
// active sink's rows.
func (b *bench) runClaimsWaiting(ctx context.Context) error {
	for run := range b.sz.pressureRuns {
		order := rotated(b.systems, run)
		for _, sys := range order {
			if err := b.store(sys).reset(ctx); err != nil {
				return err
			}
			b.logf("  run %d %s, empty", run+1, sys.name)
			if err := b.waitingClaims(ctx, sys, "empty", mWait0, mWaitP50a); err != nil {
				return fmt.Errorf("%s run %d: %w", sys.name, run+1, err)
			}
		}
		seeded := map[string]bool{}
		for _, sys := range order {
			if db := sys.database(); !seeded[db] {
				b.logf("  run %d seeding %d paused, %d throttled and %d unconfigured waiting rows into %s", run+1, b.sz.waitingRows, b.sz.waitingRows, b.sz.waitingRows, db)
				if err := b.seedWaiting(ctx, b.store(sys)); err != nil {
					return err
				}
				seeded[db] = true
			}
		}
		for _, sys := range order {
			b.logf("  run %d %s, beside the waiting rows", run+1, sys.name)
			if err := b.waitingClaims(ctx, sys, "beside the waiting rows", mWait1, mWaitP50b); err != nil {
				return fmt.Errorf("%s run %d: %w", sys.name, run+1, err)
			}
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, "### claims-waiting: claims beside %d paused, %d throttled and %d unconfigured waiting rows\n\n", b.sz.waitingRows, b.sz.waitingRows, b.sz.waitingRows)
	fmt.Fprintln(&w, "| system | target | measured | verdict |")
	fmt.Fprintln(&w, "|---|---|---|---|")
	for _, sys := range b.systems {
		ratio := b.res.med(mWait1, sys.name) / b.res.med(mWait0, sys.name)
		b.res.add(mWaitRatio, sys.name, ratio)
		fmt.Fprintf(&w, "| %s | claim per 1,000 rows beside the waiting rows ≤ %.1f× empty | %.2f× | %s |\n",
			sys.label, waitingTarget, ratio, passFail(ratio <= waitingTarget))
	}
	b.res.sections = append(b.res.sections, w.String())
	b.res.note("Claims beside waiting rows: one relay burns down %d fresh rows of the active sink; the waiting rows (made an hour earlier, so first in claim order) were vacuumed and analyzed; claim time is the claim statements' round trip per 1,000 rows claimed, and the median claim.",
		b.sz.waitingPending)
	return nil
}

// seedWaiting empties s's table, then adds the paused, the throttled and
// the unconfigured sinks' waiting rows and pauses the one; then it vacuums
// and counts them, as autovacuum and running relays would have by then.
func (b *bench) seedWaiting(ctx context.Context, s store) error {
	if err := s.reset(ctx); err != nil {
		return err
	}
	for _, sink := range []string{pausedSinkName, throttledSinkName, ghostSinkName} {
		if err := s.seedWaiting(ctx, sink, b.sz.waitingRows); err != nil {
			return err
		}
	}
	if err := s.pauseSink(ctx, pausedSinkName); err != nil {
		return fmt.Errorf("pause %s: %w", pausedSinkName, err)
	}
	if _, err := s.pool().Exec(ctx, "VACUUM ANALYZE "+s.table()); err != nil {
		return err
	}
	return s.countBacklog(ctx)
}

// waitingClaims enqueues fresh rows of the active sink, lets one relay
// (configured for the paused and throttled sinks too) burn them down, checks it delivered
// exactly those, and records the claims' cost per 1,000 rows as perRows
// and their median as p50 (side names the table's state in the breakdown).
func (b *bench) waitingClaims(ctx context.Context, sys system, side string, perRows, p50 metric) error {
	s := b.store(sys)
	var before int64
	if err := s.pool().QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM "+s.table()).Scan(&before); err != nil {
		return err
	}
	n := b.sz.waitingPending
	if err := enqueueBacklog(ctx, s, n); err != nil {
		return err
	}
	rows, err := s.pool().Query(ctx, "SELECT id FROM "+s.table()+" WHERE id > $1", before)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	r, err := b.drive(relayOpts{sys: sys, count: 1, expect: n, pausedSink: true}, func(procs []*relayProc, _ int64) error {
		return waitDelivered(procs, n, b.sz.drain)
	})
	if err != nil {
		return err
	}
	if _, err := r.verify(ids); err != nil {
		return err
	}
	var stmts []stmtSample
	for _, st := range r.statements(0, 0) {
		if st.Rows > 0 { // not the empty polls after the last row
			stmts = append(stmts, st)
		}
	}
	durs := claimDurations(stmts)
	per, med := claimMsPer1000Rows(stmts), median(durs)
	b.res.add(perRows, sys.name, per)
	b.res.add(p50, sys.name, med)
	b.res.details[fmt.Sprintf("claims-waiting, %s, %s", sys.name, side)] = fmt.Sprintf(
		"%d claims of %d rows: p50 %.2f, p99 %.2f, max %.2f ms; %.2f ms per 1,000 rows", len(durs), n,
		med, percentile(durs, 99), percentile(durs, 100), per)
	b.logf("    claim %.2f ms per 1,000 rows, p50 %.2f ms over %d claims", per, med, len(claimDurations(stmts)))
	return nil
}
