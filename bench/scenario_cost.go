package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
)

// runCost is scenario 12 (issue 42, item 3): what one delivered message
// costs, in figures a loaded machine cannot move much. On two cores shared
// by the server and the relays a burn-down's rate is decided by CPU per
// message, and that CPU by whoever else runs; so the scenario counts
//   - the relay's instructions per delivered message (callgrind, a
//     burn-down of one relay run under it);
//   - the server's CPU time per delivered message (every process of the
//     private cluster, from /proc, during a burn-down of one relay outside
//     callgrind): CPU time, unlike a statement's round trip, does not grow
//     with the time spent waiting for a core;
//   - WAL per delivered message (the same burn-down).
//
// Each is a difference of two burn-downs, costMessages and twice as many,
// over costMessages (see cost).
//
// outboxd, River tuned and the bare loop (the least a claim/finish loop on
// outboxd's table costs) are measured; River defaults is left out. It
// runs on a private cluster (its WAL is then the systems' alone) and only
// when asked for by name: it needs valgrind.
func (b *bench) runCost(ctx context.Context) error {
	var systems []system
	for _, s := range b.systems {
		if s != sysRiverDefault {
			systems = append(systems, s)
		}
	}
	if slices.Contains(systems, sysOutboxd) {
		systems = append(systems, sysBare)
	}
	return b.eachRun(b.sz.runs, systems, func(run int, sys system) error { return b.cost(ctx, sys, run) })
}

func (b *bench) cost(ctx context.Context, sys system, run int) error {
	// Each figure is the difference between a burn-down of 2n messages and
	// one of n, over n: what the start costs (the connections' warm-up
	// statements, River's leader election) cancels out. The server's CPU
	// is read in clock ticks (10 ms), so its burn-downs are
	// costServerScale times larger than those under callgrind.
	var instr, serverTicks, wal, stmts [2]int64
	var last relayRun
	n := b.sz.costMessages
	for i, size := range [2]int{costServerScale * n, 2 * costServerScale * n} {
		bd, err := b.burnDownOnce(ctx, relayOpts{sys: sys, count: 1}, size)
		if err != nil {
			return err
		}
		stmts[i], serverTicks[i] = int64(len(bd.run.statements(0, 0))), bd.serverTicks
		wal[i], last = int64(bd.walPerMsg*float64(size)), bd.run
	}
	for i, size := range [2]int{n, 2 * n} {
		out := filepath.Join(b.tmp, fmt.Sprintf("callgrind-%s-%d-%d.out", sys.name, run, size))
		if _, err := b.burnDownOnce(ctx, relayOpts{sys: sys, count: 1, callgrind: out}, size); err != nil {
			return fmt.Errorf("under callgrind: %w", err)
		}
		var err error
		if instr[i], err = callgrindInstructions(out); err != nil {
			return err
		}
	}
	perMsg := func(v [2]int64, n int) float64 { return float64(v[1]-v[0]) / float64(n) }
	instrPerMsg := perMsg(instr, n)
	serverMicros := perMsg(serverTicks, costServerScale*n) * 1e6 / clockTicksPerSecond
	walPerMsg, stmtsPerMsg := perMsg(wal, costServerScale*n), perMsg(stmts, costServerScale*n)

	b.res.add(mCostInstr, sys.name, instrPerMsg)
	b.res.add(mCostServer, sys.name, serverMicros)
	b.res.add(mCostWAL, sys.name, walPerMsg)
	b.res.details["cost per message, "+sys.name] = fmt.Sprintf(
		"callgrind %d and %d instructions for %d and %d msgs: %.0f per msg; server CPU %d and %d ticks for %d and %d msgs: %.1f µs per msg; %.4f statements per msg; WAL %.0f B/msg; the larger run's statements: %s",
		instr[0], instr[1], n, 2*n, instrPerMsg, serverTicks[0], serverTicks[1], costServerScale*n, 2*costServerScale*n, serverMicros,
		stmtsPerMsg, walPerMsg, stmtSummary(last.statements(0, 0)))
	b.logf("    %.0f instructions/msg, server CPU %.1f µs/msg, WAL %.0f B/msg", instrPerMsg, serverMicros, walPerMsg)
	return nil
}

// costServerScale is how many times larger the cost scenario's burn-downs
// outside callgrind are than those under it (see cost).
const costServerScale = 10
