package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// runSteady is scenario 4: producers enqueue at a fixed rate while relays
// deliver; table size and claim time at the end versus the start.
func (b *bench) runSteady(ctx context.Context) error {
	var main, others []system
	for _, s := range b.systems {
		if s == sysRiverDefault {
			others = append(others, s)
		} else {
			main = append(main, s)
		}
	}
	if err := b.eachRun(b.sz.steadyFullRuns, main, func(_ int, sys system) error { return b.steady(ctx, sys) }); err != nil {
		return err
	}
	if len(others) > 0 && b.sz.steadyOtherRuns < b.sz.steadyFullRuns {
		b.res.note("Steady state ran %d time(s) for River defaults (%d for the others) to keep the full run near 15 minutes.",
			b.sz.steadyOtherRuns, b.sz.steadyFullRuns)
	}
	return b.eachRun(b.sz.steadyOtherRuns, others, func(_ int, sys system) error { return b.steady(ctx, sys) })
}

func (b *bench) steady(ctx context.Context, sys system) error {
	s := b.store(sys)
	if err := s.reset(ctx); err != nil {
		return err
	}
	expect := int(float64(b.sz.steadyRate) * b.sz.steadyDuration.Seconds() * 1.2)
	var produced atomic.Int64
	var startNs, endNs, backlog int64
	var endBytes, endRows int64
	r, err := b.drive(relayOpts{sys: sys, count: steadyRelays, expect: expect}, func(procs []*relayProc, _ int64) error {
		startNs = time.Now().UnixNano()
		if err := produceAtRate(ctx, s, b.sz.steadyRate, b.sz.steadyDuration, &produced); err != nil {
			return err
		}
		endNs = time.Now().UnixNano()
		backlog = produced.Load() - delivered(procs)
		var err error
		if endBytes, err = tableBytes(ctx, s); err != nil {
			return err
		}
		if endRows, err = tableRows(ctx, s); err != nil {
			return err
		}
		return waitDelivered(procs, int(produced.Load()), b.sz.drain)
	})
	if err != nil {
		return err
	}
	w := b.sz.steadyWindow.Nanoseconds()
	startClaims := claimDurations(r.statements(r.goNs, r.goNs+w))
	endClaims := claimDurations(r.statements(endNs-w, endNs))
	c0, c1 := median(startClaims), median(endClaims)
	b.res.add(mSteadyStart, sys.name, c0)
	b.res.add(mSteadyEnd, sys.name, c1)
	b.res.add(mSteadyGrowth, sys.name, c1/c0)
	b.res.add(mSteadyTable, sys.name, float64(endBytes)/(1<<20))
	b.res.add(mSteadyLag, sys.name, float64(backlog))
	b.res.details["steady state, "+sys.name] = fmt.Sprintf(
		"%d msgs in %.0f s (%.0f msg/s achieved of %d offered); %d rows, %.1f MB at the end; claims p50 %.2f → %.2f ms (%d and %d claims in the first and last %s); %s",
		produced.Load(), float64(endNs-startNs)/float64(time.Second), perSecond(int(produced.Load()), endNs-startNs), b.sz.steadyRate,
		endRows, float64(endBytes)/(1<<20), c0, c1, len(startClaims), len(endClaims), b.sz.steadyWindow,
		stmtSummary(r.statements(r.goNs, endNs)))
	b.logf("    claim %.2f → %.2f ms, %.1f MB, backlog %d", c0, c1, float64(endBytes)/(1<<20), backlog)
	return nil
}

// produceAtRate enqueues single-message transactions from steadyProducers
// goroutines at rate messages per second in total, for d.
func produceAtRate(ctx context.Context, s store, rate int, d time.Duration, produced *atomic.Int64) error {
	return paceProducers(ctx, s, steadyProducers, rate, d, false, func(int64, int64) { produced.Add(1) })
}

// paceProducers enqueues single-message transactions from n goroutines at
// rate messages per second in total, for d, and reports each commit to
// committed (the row's id and when its commit returned, Unix ns; called
// concurrently). asyncCommit makes the transactions' commits not wait
// for the WAL flush (synchronous_commit off, for the transaction only).
func paceProducers(ctx context.Context, s store, n, rate int, d time.Duration, asyncCommit bool, committed func(id, atNs int64)) error {
	interval := time.Duration(n) * time.Second / time.Duration(rate)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for p := range n {
		wg.Go(func() {
			// Producers are offset so their commits interleave evenly.
			for i := 0; ; i++ {
				at := start.Add(time.Duration(i)*interval + time.Duration(p)*interval/time.Duration(n))
				// A producer that falls behind (commits slower than its
				// share of the rate) skips the ticks it missed, so the
				// scenario lasts d whatever the machine manages.
				if at.Sub(start) >= d || time.Since(start) >= d {
					return
				}
				if late := time.Since(at); late > interval {
					i += int(late / interval)
					continue
				}
				time.Sleep(time.Until(at))
				var id int64
				err := inTx(ctx, s, func(tx pgx.Tx) error {
					if asyncCommit {
						if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
							return err
						}
					}
					var err error
					id, err = s.enqueueOne(ctx, tx)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				committed(id, time.Now().UnixNano())
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
