package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// latencySettle is how long relays idle before the first message, so they
// are connected, listening and past their start-up work.
const latencySettle = 2 * time.Second

// runLatency is scenario 2: idle relays, single-message transactions a fixed
// gap apart, commit (as the producer saw it return) to delivery start.
func (b *bench) runLatency(ctx context.Context) error {
	return b.eachRun(b.sz.runs, b.systems, func(run int, sys system) error {
		return b.latency(ctx, sys)
	})
}

func (b *bench) latency(ctx context.Context, sys system) error {
	s := b.store(sys)
	if err := s.reset(ctx); err != nil {
		return err
	}
	m := b.sz.latencyMessages
	committed := make(map[int64]int64, m)
	var ids []int64
	r, err := b.drive(relayOpts{sys: sys, count: latencyRelays, expect: m}, func(procs []*relayProc, goNs int64) error {
		time.Sleep(latencySettle)
		start := time.Now()
		for i := range m {
			time.Sleep(time.Until(start.Add(time.Duration(i) * b.sz.latencyGap)))
			var id int64
			err := inTx(ctx, s, func(tx pgx.Tx) error {
				var err error
				id, err = s.enqueueOne(ctx, tx)
				return err
			})
			if err != nil {
				return err
			}
			committed[id] = time.Now().UnixNano()
			ids = append(ids, id)
		}
		return waitDelivered(procs, m, b.sz.drain)
	})
	if err != nil {
		return err
	}
	if _, err := r.verify(ids); err != nil {
		return err
	}
	p50, p99, pmax := commitToDelivery(committed, r)
	b.res.add(mLatP50, sys.name, p50)
	b.res.add(mLatP99, sys.name, p99)
	b.res.add(mLatMax, sys.name, pmax)
	b.res.add(mRSSLatency, sys.name, float64(r.peakRSS)/(1<<20))
	b.res.details["latency, "+sys.name] = fmt.Sprintf("p50 %.2f p99 %.2f max %.2f ms; %s", p50, p99, pmax,
		stmtSummary(r.statements(r.goNs+int64(latencySettle), 0)))
	b.logf("    p50 %.2f p99 %.2f max %.2f ms", p50, p99, pmax)
	return nil
}
