package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// relayRun is what one session of relay children left behind.
type relayRun struct {
	goNs      int64
	reports   []childReport
	peakRSS   int64    // the largest VmHWM among the children, bytes
	relayCPU  int64    // the children's CPU ticks during the session
	busyCPU   int64    // the machine's busy CPU ticks during the session
	totalCPU  int64    // the machine's CPU ticks during the session (all cores)
	elapsedNs int64    // go until the work was done
	stopNs    int64    // from telling the children to stop until the last exited
	exits     []string // relays that stopped on their own (see childReport.Exited)
}

// drive starts the relay children, lets them go, runs work while they run
// (work returns once the session's deliveries are made), then measures and
// stops them.
func (b *bench) drive(o relayOpts, work func(procs []*relayProc, goNs int64) error) (relayRun, error) {
	// Flush what earlier runs wrote, as pgbench does before a run: a
	// checkpoint the server starts on its own (a burn-down writes hundreds
	// of MB of WAL) would otherwise land inside whichever system's
	// measurement comes next.
	if _, err := b.admin.Exec(context.Background(), "CHECKPOINT"); err != nil {
		return relayRun{}, fmt.Errorf("checkpoint: %w", err)
	}
	procs, err := b.startRelays(o)
	if err != nil {
		return relayRun{}, err
	}
	var r relayRun
	cpu0 := childrenCPU(procs)
	busy0, total0, _ := machineCPUTicks()
	r.goNs = goRelays(procs)
	if err := work(procs, r.goNs); err != nil {
		stopRelays(procs)
		return r, err
	}
	r.elapsedNs = time.Now().UnixNano() - r.goNs
	busy1, total1, _ := machineCPUTicks()
	r.busyCPU, r.totalCPU = busy1-busy0, total1-total0
	r.relayCPU = childrenCPU(procs) - cpu0
	for _, p := range procs {
		rss, err := peakRSS(p.cmd.Process.Pid)
		if err != nil {
			stopRelays(procs)
			return r, err
		}
		r.peakRSS = max(r.peakRSS, rss)
	}
	stopAt := time.Now()
	r.reports, err = collectRelays(procs)
	r.stopNs = time.Since(stopAt).Nanoseconds()
	for _, rep := range r.reports {
		if rep.Exited != "" {
			r.exits = append(r.exits, rep.Exited)
		}
	}
	if err == nil && len(r.exits) > 0 && !o.tolerateExits {
		err = fmt.Errorf("%d relay(s) stopped before they were told to: %s", len(r.exits), r.exits[0])
	}
	return r, err
}

func childrenCPU(procs []*relayProc) int64 {
	var t int64
	for _, p := range procs {
		v, _ := procCPUTicks(p.cmd.Process.Pid)
		t += v
	}
	return t
}

// firstDeliveries maps each delivered id to the start of its first delivery
// and counts deliveries per id, across all children.
func (r relayRun) firstDeliveries() (first map[int64]int64, count map[int64]int) {
	first, count = map[int64]int64{}, map[int64]int{}
	for _, rep := range r.reports {
		for _, d := range rep.Deliveries {
			if t, seen := first[d.ID]; !seen || d.Ns < t {
				first[d.ID] = d.Ns
			}
			count[d.ID]++
		}
	}
	return first, count
}

// lost counts the ids of want never delivered and the deliveries of ids
// not in want.
func (r relayRun) lost(want []int64) (missing, unknown int) {
	_, count := r.firstDeliveries()
	for _, id := range want {
		if count[id] == 0 {
			missing++
		}
	}
	return missing, len(count) - (len(want) - missing)
}

// verify checks that every id in want was delivered; it returns how many
// were delivered more than once (at-least-once allows it; a clean run should
// have none).
func (r relayRun) verify(want []int64) (dups int, err error) {
	_, count := r.firstDeliveries()
	missing := 0
	for _, id := range want {
		switch c := count[id]; {
		case c == 0:
			missing++
		case c > 1:
			dups++
		}
	}
	if missing > 0 {
		return dups, fmt.Errorf("verification failed: %d of %d messages never delivered", missing, len(want))
	}
	if extra := len(count) - len(want); extra > 0 {
		return dups, fmt.Errorf("verification failed: %d deliveries of ids that were not enqueued", extra)
	}
	return dups, nil
}

// lastDeliveryNs is when the last delivery of the session started.
func (r relayRun) lastDeliveryNs() int64 {
	var last int64
	for _, rep := range r.reports {
		for _, d := range rep.Deliveries {
			last = max(last, d.Ns)
		}
	}
	return last
}

// statements returns the statements the children sent between from and to
// (Unix ns; 0 means unbounded).
func (r relayRun) statements(from, to int64) []stmtSample {
	var out []stmtSample
	for _, rep := range r.reports {
		for _, s := range rep.Stmts {
			if (from == 0 || s.StartNs >= from) && (to == 0 || s.StartNs < to) {
				out = append(out, s)
			}
		}
	}
	return out
}

// claimDurations returns the claim statements' durations in ms.
func claimDurations(stmts []stmtSample) []float64 {
	var out []float64
	for _, s := range stmts {
		if isClaim(s.Kind) {
			out = append(out, ms(s.DurNs))
		}
	}
	return out
}

// claimMsPer1000Rows is the claims' total round trip per 1,000 rows they
// claimed. A claim's round trip grows with its size, and the number of rows
// a relay claims at once varies with its pace, so only a per-row figure
// compares two runs.
func claimMsPer1000Rows(stmts []stmtSample) float64 {
	var durNs, rows int64
	for _, s := range stmts {
		if isClaim(s.Kind) {
			durNs, rows = durNs+s.DurNs, rows+s.Rows
		}
	}
	if rows == 0 {
		return 0
	}
	return ms(durNs) * 1000 / float64(rows)
}

// stmtSummary describes statements by kind: count and mean round trip,
// most frequent first.
func stmtSummary(stmts []stmtSample) string {
	type agg struct {
		kind  string
		n     int
		total int64
	}
	byKind := map[string]*agg{}
	for _, s := range stmts {
		a := byKind[s.Kind]
		if a == nil {
			a = &agg{kind: s.Kind}
			byKind[s.Kind] = a
		}
		a.n++
		a.total += s.DurNs
	}
	var all []*agg
	for _, a := range byKind {
		all = append(all, a)
	}
	slices.SortFunc(all, func(x, y *agg) int { return y.n - x.n })
	out := ""
	for i, a := range all {
		if i == 6 {
			break
		}
		out += fmt.Sprintf("%s×%d (mean %.2f ms, %.0f ms total); ", a.kind, a.n, ms(a.total)/float64(a.n), ms(a.total))
	}
	return out
}

// cpuMark is where the machine's CPU time stood at one moment: the relay
// children's, this process's (the producers, in the stepped and pressure
// scenarios), and the machine's busy and total ticks. Two marks split an
// interval's CPU between the relays, the producers and the rest (on this
// machine: PostgreSQL).
type cpuMark struct{ relays, self, busy, total int64 }

func markCPU(procs []*relayProc) cpuMark {
	self, _ := procCPUTicks(os.Getpid())
	busy, total, _ := machineCPUTicks()
	return cpuMark{relays: childrenCPU(procs), self: self, busy: busy, total: total}
}

// cpuSplit is the CPU of an interval between two marks.
type cpuSplit struct {
	relayUsPerMsg float64 // the relays' CPU per message delivered in it, µs
	// Shares of the machine's CPU (all cores): the relays', the
	// producers' and the rest's; idle is what is left.
	relays, producers, rest float64
}

func splitCPU(from, to cpuMark, delivered int) cpuSplit {
	total := float64(to.total - from.total)
	if total <= 0 {
		return cpuSplit{}
	}
	relays, self := float64(to.relays-from.relays), float64(to.self-from.self)
	s := cpuSplit{relays: relays / total, producers: self / total, rest: (float64(to.busy-from.busy) - relays - self) / total}
	if delivered > 0 {
		s.relayUsPerMsg = cpuMicrosPerMsg(to.relays-from.relays, delivered)
	}
	return s
}

// String is the split as the scenarios' tables print it.
func (s cpuSplit) String() string {
	return fmt.Sprintf("%.1f µs/msg; %.0f/%.0f/%.0f %%", s.relayUsPerMsg, 100*s.relays, 100*s.producers, 100*s.rest)
}

// cpuColumnNote explains the CPU column of the stepped and pressure
// tables.
const cpuColumnNote = "The CPU column gives the relays' CPU per delivered message, then the shares of the machine's CPU (all cores) taken by the relays, by the producers (the benchmark's own process) and by the rest (PostgreSQL, serving both): the burn-down that measures capacity has no producers, so there the relays and PostgreSQL have the whole machine."
