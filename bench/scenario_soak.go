package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/relay"
)

// soakSamples is how many samples a soak takes over its duration (at most
// one a second).
const soakSamples = 12

// soakFlat is how much a soak's figures may grow from the first sample
// after the history reached its retention to the last and still count as
// flat.
const soakFlat = 1.25

// soakBacklogBound is the largest backlog a settled soak may show, in
// seconds of its load.
const soakBacklogBound = 10 * time.Second

func maxDepth(samples []soakSample) int64 {
	var m int64
	for _, s := range samples {
		m = max(m, s.depth)
	}
	return m
}

// soakSample is one sample of a soak.
type soakSample struct {
	at                 time.Duration // since the producers started
	depth              int64
	heap, index        int64   // bytes of the hot tables
	live, dead         int64   // tuples of the hot tables
	claimP50, claimP99 float64 // ms, the claims since the sample before
	claimPer1000       float64 // ms per 1,000 claimed rows, the same claims
}

// soakOutcome is one system's soak.
type soakOutcome struct {
	sys     system
	samples []soakSample
	rate    float64 // msg/s produced
	drained bool
}

// runSoak is scenario 11 (issue 22, item 3): producers write -rate msg/s
// for -duration while two relays deliver and delivered rows are kept for
// -retention; claim latency, table and index sizes and tuples are sampled
// over time.
func (b *bench) runSoak(ctx context.Context) error {
	outs, err := eachSystem(b, b.sz.pressureRuns, func(sys system) (soakOutcome, error) { return b.soakRun(ctx, sys) })
	if err != nil {
		return err
	}
	b.res.sections = append(b.res.sections, b.soakSection(outs))
	return nil
}

func (b *bench) soakRun(ctx context.Context, sys system) (soakOutcome, error) {
	out := soakOutcome{sys: sys}
	s := b.store(sys)
	if err := s.reset(ctx); err != nil {
		return out, err
	}
	tables, err := s.hotTables(ctx)
	if err != nil {
		return out, err
	}
	d := b.sz.soakDuration
	every := max(d/soakSamples, time.Second)
	var at []int64 // each sample's time, for the claims between samples
	var start int64
	r, err := b.drive(relayOpts{sys: sys, count: steadyRelays, retention: b.sz.soakRetention, countOnly: true}, func(procs []*relayProc, _ int64) error {
		time.Sleep(min(latencySettle, every))
		pr := startProducers(ctx, s, b.sz.soakRate, false)
		start = time.Now().UnixNano()
		for i := 1; i <= int(d/every); i++ {
			time.Sleep(time.Until(time.Unix(0, start).Add(time.Duration(i) * every)))
			smp := soakSample{at: time.Duration(time.Now().UnixNano() - start), depth: max(0, pr.produced.Load()-delivered(procs))}
			var err error
			if smp.heap, smp.index, err = relationSizes(ctx, s, tables); err != nil {
				_, _ = pr.stop()
				return err
			}
			if smp.live, smp.dead, err = tupleCounts(ctx, s, tables); err != nil {
				_, _ = pr.stop()
				return err
			}
			at = append(at, time.Now().UnixNano())
			out.samples = append(out.samples, smp)
			b.logf("    %s: depth %d, %.1f + %.1f MB, %d dead", smp.at.Round(time.Second), smp.depth, float64(smp.heap)/(1<<20), float64(smp.index)/(1<<20), smp.dead)
		}
		_, err := pr.stop()
		if err != nil {
			return fmt.Errorf("producers: %w", err)
		}
		out.rate = perSecond(int(pr.produced.Load()), time.Now().UnixNano()-start)
		out.drained, err = waitDrained(ctx, s, procs, int(pr.produced.Load()), b.sz.drain)
		return err
	})
	if err != nil {
		return out, err
	}
	from := start
	for i := range out.samples {
		var claims []stmtSample
		for _, st := range r.statements(from, at[i]) {
			if st.Rows > 0 {
				claims = append(claims, st)
			}
		}
		durs := claimDurations(claims)
		out.samples[i].claimP50, out.samples[i].claimP99 = percentile(durs, 50), percentile(durs, 99)
		out.samples[i].claimPer1000 = claimMsPer1000Rows(claims)
		from = at[i]
	}
	return out, nil
}

// soakSettled is when a soak's history has reached its steady size: one
// retention period, plus two maintenance intervals for the pruning to
// catch up.
func (b *bench) soakSettled() time.Duration {
	return b.sz.soakRetention + 2*relay.DefaultMaintenanceInterval
}

func (b *bench) soakSection(outs []soakOutcome) string {
	var w strings.Builder
	fmt.Fprintf(&w, "### soak: %d msg/s for %s, delivered rows kept %s\n\n", b.sz.soakRate, b.sz.soakDuration, b.sz.soakRetention)
	fmt.Fprintf(&w, "%d relays per system; claims are those that claimed rows since the sample before; sizes and tuples sum the hot tables (outboxd: every table of its schema; River: river_job).\n\n", steadyRelays)
	fmt.Fprintln(&w, "| system | at | queue depth | table (MB) | indexes (MB) | live tuples | dead tuples | claim p50 (ms) | claim p99 (ms) | claim per 1,000 rows (ms) |")
	fmt.Fprintln(&w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, o := range outs {
		for _, s := range o.samples {
			fmt.Fprintf(&w, "| %s | %s | %d | %.1f | %.1f | %d | %d | %.2f | %.2f | %.2f |\n", o.sys.label, s.at.Round(time.Second), s.depth,
				float64(s.heap)/(1<<20), float64(s.index)/(1<<20), s.live, s.dead, s.claimP50, s.claimP99, s.claimPer1000)
		}
	}
	fmt.Fprintln(&w)
	fmt.Fprintln(&w, "| system | target | measured | verdict |")
	fmt.Fprintln(&w, "|---|---|---|---|")
	settled := b.soakSettled()
	for _, o := range outs {
		row := func(target, measured string, ok bool) {
			fmt.Fprintf(&w, "| %s | %s | %s | %s |\n", o.sys.label, target, measured, passFail(ok))
		}
		// Not a verdict on the relays: producers that fell short leave
		// them less to do.
		row(fmt.Sprintf("producers managed ≥ 95%% of the %d msg/s asked", b.sz.soakRate), fmt.Sprintf("%.0f msg/s", o.rate), o.rate >= 0.95*float64(b.sz.soakRate))
		row("the backlog drains after", fmt.Sprintf("drained: %t", o.drained), o.drained)
		ref := -1
		for i, s := range o.samples {
			if s.at >= settled {
				ref = i
				break
			}
		}
		if ref < 0 || ref == len(o.samples)-1 {
			fmt.Fprintf(&w, "| %s | flat after %s (retention + 2 maintenance intervals) | the soak is too short to tell | – |\n", o.sys.label, settled)
			continue
		}
		a, z := o.samples[ref], o.samples[len(o.samples)-1]
		depth := maxDepth(o.samples[ref:])
		row(fmt.Sprintf("queue depth from %s on ≤ %s of the load", a.at.Round(time.Second), soakBacklogBound), fmt.Sprintf("%d at most", depth),
			float64(depth) <= o.rate*soakBacklogBound.Seconds())
		size := float64(z.heap+z.index) / float64(a.heap+a.index)
		row(fmt.Sprintf("table + indexes flat from %s on (≤ %.2f×)", a.at.Round(time.Second), soakFlat), fmt.Sprintf("%.2f×", size), size <= soakFlat)
		claim := z.claimPer1000 / a.claimPer1000
		row(fmt.Sprintf("claim per 1,000 rows flat from %s on (≤ %.2f×)", a.at.Round(time.Second), soakFlat), fmt.Sprintf("%.2f×", claim), claim <= soakFlat)
	}
	return w.String()
}
