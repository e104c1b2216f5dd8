package main

import (
	"context"
	"fmt"
	"time"
)

// runIdle is scenario 6: one relay with nothing to do; the statements it
// sends per second (counted in the relay) and the transactions its database
// records in pg_stat_database over the same window.
func (b *bench) runIdle(ctx context.Context) error {
	return b.eachRun(b.sz.runs, b.systems, func(_ int, sys system) error { return b.idle(ctx, sys) })
}

func (b *bench) idle(ctx context.Context, sys system) error {
	if err := b.store(sys).reset(ctx); err != nil {
		return err
	}
	var from, to, x0, x1 int64
	r, err := b.drive(relayOpts{sys: sys, count: 1}, func(_ []*relayProc, goNs int64) error {
		time.Sleep(b.sz.idleSettle)
		var err error
		from = time.Now().UnixNano()
		if x0, err = b.xacts(ctx, sys.database()); err != nil {
			return err
		}
		time.Sleep(b.sz.idleWindow)
		to = time.Now().UnixNano()
		x1, err = b.xacts(ctx, sys.database())
		return err
	})
	if err != nil {
		return err
	}
	stmts := r.statements(from, to)
	secs := float64(to-from) / float64(time.Second)
	b.res.add(mIdleQ, sys.name, float64(len(stmts))/secs)
	b.res.add(mIdleX, sys.name, float64(x1-x0)/secs)
	b.res.details["idle, "+sys.name] = fmt.Sprintf("%d statements in %.0f s: %s", len(stmts), secs, stmtSummary(stmts))
	b.logf("    %.2f statements/s, %.2f xact/s", float64(len(stmts))/secs, float64(x1-x0)/secs)
	return nil
}

// xacts is the committed plus rolled-back transactions pg_stat_database
// holds for db. The admin connection is on another database, so its own
// queries do not count.
func (b *bench) xacts(ctx context.Context, db string) (int64, error) {
	var n int64
	err := b.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, db).Scan(&n)
	return n, err
}
