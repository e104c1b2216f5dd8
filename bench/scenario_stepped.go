package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// stepFactors are the stepped scenario's offered loads, as multiples of
// the relays' capacity (issue 22, item 1).
var stepFactors = []float64{0.5, 1, 1.5, 2}

// steppedTarget is item 1's bound: at 2× capacity offered, at least this
// share of the capacity is delivered.
const steppedTarget = 0.9

// stepFigures are one step's figures.
type stepFigures struct {
	factor             float64
	target             int     // msg/s asked of the producers
	offered, delivered float64 // msg/s
	p50, p99           float64 // pickup, ms, of the step's delivered messages
	undelivered        int     // messages of the step never delivered
	claimP99           float64 // ms
	backlog            int64   // at the step's end
	cpu                cpuSplit
}

// steppedOutcome is one system's stepped run.
type steppedOutcome struct {
	sys      system
	capacity float64
	steps    []stepFigures
	drained  bool
	drain    time.Duration // from the last step's end until the table was empty
	missing  int
	exits    []string
}

// runStepped is scenario 10: on a fresh, never analyzed database, two
// relays under offered load stepped from 0.5× to 2× of their capacity
// (measured first by a burn-down, or -capacity), each step -phase long,
// then no load until the backlog drained.
func (b *bench) runStepped(ctx context.Context) error {
	outs, err := eachSystem(b, b.sz.pressureRuns, func(sys system) (steppedOutcome, error) {
		c, err := b.capacity(ctx, sys)
		if err != nil {
			return steppedOutcome{}, err
		}
		// A fresh database: created and migrated, never analyzed.
		b.store(sys).pool().Close()
		if err := b.recreateDatabase(ctx, sys.database()); err != nil {
			return steppedOutcome{}, err
		}
		return b.steppedRun(ctx, sys, c)
	})
	if err != nil {
		return err
	}
	b.res.sections = append(b.res.sections, b.steppedSection(outs))
	return nil
}

func (b *bench) steppedRun(ctx context.Context, sys system, capacity float64) (steppedOutcome, error) {
	out := steppedOutcome{sys: sys, capacity: capacity}
	s := b.store(sys)
	tables, err := s.hotTables(ctx)
	if err != nil {
		return out, err
	}
	step := b.sz.phase
	sum := 0.0
	for _, f := range stepFactors {
		sum += f
	}
	expect := int(sum * capacity * step.Seconds() * 1.1)
	marks := make([]int64, len(stepFactors)+1)
	cpuMarks := make([]cpuMark, len(stepFactors)+1)
	var commits []commit
	var samples []sample
	var endAt int64
	r, err := b.drive(relayOpts{sys: sys, count: b.sz.pressureRelays, expect: expect, tolerateExits: true}, func(procs []*relayProc, _ int64) error {
		time.Sleep(min(latencySettle, step))
		pr := startProducers(ctx, s, int(stepFactors[0]*capacity), true)
		sm := startSampler(ctx, s, tables, func() int64 { return pr.produced.Load() - delivered(procs) }, sampleEvery)
		for i, f := range stepFactors {
			pr.setRate(int(f * capacity))
			marks[i], cpuMarks[i] = time.Now().UnixNano(), markCPU(procs)
			b.logf("    step %.1f× (%d msg/s offered)", f, int(f*capacity))
			time.Sleep(step)
		}
		marks[len(stepFactors)], cpuMarks[len(stepFactors)] = time.Now().UnixNano(), markCPU(procs)
		commits, err = pr.stop()
		if err != nil {
			_, _ = sm.stop()
			return fmt.Errorf("producers: %w", err)
		}
		if out.drained, err = waitDrained(ctx, s, procs, len(commits), b.sz.drain); err != nil {
			_, _ = sm.stop()
			return err
		}
		endAt = time.Now().UnixNano()
		samples, err = sm.stop()
		return err
	})
	if err != nil {
		return out, err
	}
	out.drain = time.Duration(endAt - marks[len(stepFactors)])
	first, _ := r.firstDeliveries()
	for i, f := range stepFactors {
		from, to := marks[i], marks[i+1]
		secs := float64(to-from) / float64(time.Second)
		sf := stepFigures{factor: f, target: int(f * capacity)}
		var lat []float64
		offered := 0
		for _, c := range commits {
			if c.Ns < from || c.Ns >= to {
				continue
			}
			offered++
			if t, ok := first[c.ID]; ok {
				lat = append(lat, ms(t-c.Ns))
			} else {
				sf.undelivered++
			}
		}
		done := 0
		for _, t := range first {
			if t >= from && t < to {
				done++
			}
		}
		sf.offered, sf.delivered = float64(offered)/secs, float64(done)/secs
		sf.p50, sf.p99 = percentile(lat, 50), percentile(lat, 99)
		sf.cpu = splitCPU(cpuMarks[i], cpuMarks[i+1], done)
		sf.claimP99 = percentile(claimDurations(r.statements(from, to)), 99)
		if in := between(samples, from, to); len(in) > 0 {
			sf.backlog = in[len(in)-1].Depth
		}
		out.steps = append(out.steps, sf)
	}
	ids := idsOf(commits)
	out.missing, _ = r.lost(ids)
	out.exits = r.exits
	last := out.steps[len(out.steps)-1]
	b.logf("    at %.1f×: %.0f of %.0f msg/s offered delivered; drained %t after %.1f s", last.factor, last.delivered, last.offered, out.drained, out.drain.Seconds())
	return out, nil
}

func (b *bench) steppedSection(outs []steppedOutcome) string {
	var w strings.Builder
	fmt.Fprintf(&w, "### stepped: offered load stepped past capacity on a fresh, never analyzed database\n\n")
	fmt.Fprintf(&w, "Relays per system: %d; steps of %s; producers write single-message transactions on %d connections (up to %d msg/s) and batches on %d; capacity is a %d-message burn-down of the same relays (or -capacity). %s\n\n",
		b.sz.pressureRelays, b.sz.phase, singleProducers, singleShareMax, batchProducers, b.sz.capacityBacklog, cpuColumnNote)
	fmt.Fprintln(&w, "| system | step | offered target (msg/s) | offered (msg/s) | delivered (msg/s) | delivered/offered | delivered/capacity | pickup p50 (ms) | pickup p99 (ms) | claim p99 (ms) | backlog at end | CPU: relays per msg; relays/producers/rest |")
	fmt.Fprintln(&w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, o := range outs {
		for _, s := range o.steps {
			fmt.Fprintf(&w, "| %s | %.1f× | %d | %.0f | %.0f | %.2f | %.2f | %.1f | %.1f | %.1f | %d | %s |\n", o.sys.label, s.factor, s.target,
				s.offered, s.delivered, s.delivered/s.offered, s.delivered/o.capacity, s.p50, s.p99, s.claimP99, s.backlog, s.cpu)
		}
	}
	fmt.Fprintln(&w)
	fmt.Fprintln(&w, "| system | target | measured | verdict |")
	fmt.Fprintln(&w, "|---|---|---|---|")
	for _, o := range outs {
		last := o.steps[len(o.steps)-1]
		fmt.Fprintf(&w, "| %s | at %.0f× offered, delivered ≥ %.1f× capacity (%.0f msg/s) | %.0f msg/s (%.2f×) | %s |\n", o.sys.label,
			last.factor, steppedTarget, o.capacity, last.delivered, last.delivered/o.capacity, passFail(last.delivered >= steppedTarget*o.capacity))
		best := 0.0
		for _, s := range o.steps {
			best = max(best, s.delivered)
		}
		fmt.Fprintf(&w, "| %s | no collapse: at %.0f× offered, delivered ≥ %.1f× the best step (%.0f msg/s) | %.0f msg/s (%.2f×) | %s |\n", o.sys.label,
			last.factor, steppedTarget, best, last.delivered, last.delivered/best, passFail(last.delivered >= steppedTarget*best))
		fmt.Fprintf(&w, "| %s | the backlog drains once the load stops | %s | %s |\n", o.sys.label, recoveryText(o.drain, o.drained), passFail(o.drained))
		fmt.Fprintf(&w, "| %s | no relay exits, nothing lost | %d exits, %d never delivered | %s |\n", o.sys.label, len(o.exits), o.missing,
			passFail(len(o.exits) == 0 && o.missing == 0))
	}
	return w.String()
}
