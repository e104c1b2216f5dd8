package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// latencyLoadRates are the steady loads (msg/s) the latency-load scenario
// measures latency at: the curve beside the latency scenario's single
// producer (issue 42, item 2).
var latencyLoadRates = []int{500, 2000}

// latencyLoadProducers is how many producers share a load, each
// committing one message per transaction. Their commits do not wait for
// the WAL flush: a durable commit took 4-15 ms on the busy development
// machine, and eight durable producers offered 2,000 msg/s reached 540.
// What is measured starts when a commit returns, and both systems get the
// same producers.
const latencyLoadProducers = enqueueConns

// latencyLoadMetrics are the table rows of each rate: p50, p99, max.
var latencyLoadMetrics = map[int][3]metric{
	500:  {mLoad500P50, mLoad500P99, mLoad500Max},
	2000: {mLoad2000P50, mLoad2000P99, mLoad2000Max},
}

// runLatencyLoad is scenario 2b: relays (latencyRelays) deliver while
// producers enqueue single-message transactions at a steady rate; latency
// from each commit (as its producer saw it return) to its delivery's start.
func (b *bench) runLatencyLoad(ctx context.Context) error {
	for _, rate := range latencyLoadRates {
		err := b.eachRun(b.sz.runs, b.systems, func(_ int, sys system) error {
			return b.latencyAtRate(ctx, sys, rate)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) latencyAtRate(ctx context.Context, sys system, rate int) error {
	s := b.store(sys)
	if err := s.reset(ctx); err != nil {
		return err
	}
	expect := int(float64(rate) * b.sz.latencyLoadDuration.Seconds() * 1.2)
	var mu sync.Mutex
	committed := make(map[int64]int64, expect)
	var ids []int64
	var startNs, endNs int64
	r, err := b.drive(relayOpts{sys: sys, count: latencyRelays, expect: expect}, func(procs []*relayProc, _ int64) error {
		time.Sleep(latencySettle)
		startNs = time.Now().UnixNano()
		err := paceProducers(ctx, s, latencyLoadProducers, rate, b.sz.latencyLoadDuration, true, func(id, atNs int64) {
			mu.Lock()
			committed[id] = atNs
			ids = append(ids, id)
			mu.Unlock()
		})
		endNs = time.Now().UnixNano()
		if err != nil {
			return err
		}
		return waitDelivered(procs, len(ids), b.sz.drain)
	})
	if err != nil {
		return err
	}
	if _, err := r.verify(ids); err != nil {
		return err
	}
	p50, p99, pmax := commitToDelivery(committed, r)
	m := latencyLoadMetrics[rate]
	b.res.add(m[0], sys.name, p50)
	b.res.add(m[1], sys.name, p99)
	b.res.add(m[2], sys.name, pmax)
	b.res.details[fmt.Sprintf("latency at %d msg/s, %s", rate, sys.name)] = fmt.Sprintf(
		"%d msgs, %.0f msg/s achieved; p50 %.2f p99 %.2f max %.2f ms; %s",
		len(ids), perSecond(len(ids), endNs-startNs), p50, p99, pmax, stmtSummary(r.statements(startNs, endNs)))
	b.logf("    %d msg/s: p50 %.2f p99 %.2f max %.2f ms (%.0f msg/s achieved)", rate, p50, p99, pmax, perSecond(len(ids), endNs-startNs))
	return nil
}

// commitToDelivery is the p50, p99 and maximum, in ms, of the time from
// each message's commit (committed: id -> Unix ns) to its first delivery
// in r.
func commitToDelivery(committed map[int64]int64, r relayRun) (p50, p99, pmax float64) {
	first, _ := r.firstDeliveries()
	lat := make([]float64, 0, len(committed))
	for id, c := range committed {
		lat = append(lat, ms(first[id]-c))
	}
	return percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
}
