package main

import (
	"context"
	"fmt"
)

// runHistory is scenario 5: claim time with an empty table and with
// historyRows delivered rows in it. Each run empties the tables, measures
// every system, seeds each database's history once, and measures again.
func (b *bench) runHistory(ctx context.Context) error {
	for run := range b.sz.runs {
		order := rotated(b.systems, run)
		for _, sys := range order {
			if err := b.store(sys).reset(ctx); err != nil {
				return err
			}
			b.logf("  run %d %s, empty", run+1, sys.name)
			if err := b.historyClaim(ctx, sys, mHist0); err != nil {
				return fmt.Errorf("%s run %d: %w", sys.name, run+1, err)
			}
		}
		seeded := map[string]bool{}
		for _, sys := range order {
			db := sys.database()
			if !seeded[db] {
				// Reset first so the history table holds only the seed (and
				// the few rows this run then delivers).
				if err := b.store(sys).reset(ctx); err != nil {
					return err
				}
				b.logf("  run %d seeding %d delivered rows into %s", run+1, b.sz.historyRows, db)
				if err := b.store(sys).seedHistory(ctx, b.sz.historyRows); err != nil {
					return err
				}
				seeded[db] = true
			}
		}
		for _, sys := range order {
			b.logf("  run %d %s, with history", run+1, sys.name)
			if err := b.historyClaim(ctx, sys, mHist1); err != nil {
				return fmt.Errorf("%s run %d: %w", sys.name, run+1, err)
			}
		}
	}
	for _, sys := range b.systems {
		b.res.add(mHistRatio, sys.name, b.res.med(mHist1, sys.name)/b.res.med(mHist0, sys.name))
	}
	b.res.note("History: %d delivered rows (sent / completed, vacuumed and analyzed); claim time is the claim statements' total round trip per 1,000 rows claimed while one relay burns down %d fresh rows (%d for River defaults).",
		b.sz.historyRows, b.sz.historyPending, b.sz.historyPendingSlow)
	return nil
}

// historyClaim enqueues fresh rows, lets one relay burn them down and
// records the claims' round trip per 1,000 claimed rows as metric m.
func (b *bench) historyClaim(ctx context.Context, sys system, m metric) error {
	s := b.store(sys)
	n := backlogFor(sys, b.sz.historyPending, b.sz.historyPendingSlow)
	if err := enqueueBacklog(ctx, s, n); err != nil {
		return err
	}
	before, err := s.unfinished(ctx)
	if err != nil {
		return err
	}
	r, err := b.drive(relayOpts{sys: sys, count: 1, expect: n}, func(procs []*relayProc, _ int64) error {
		return waitDelivered(procs, int(before), b.sz.drain)
	})
	if err != nil {
		return err
	}
	stmts := r.statements(0, 0)
	c := claimMsPer1000Rows(stmts)
	b.res.add(m, sys.name, c)
	b.logf("    claim %.2f ms per 1,000 rows over %d claims", c, len(claimDurations(stmts)))
	return nil
}
