package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// besideTarget is issue 42's bound (item 4): beside the waiting rows, two
// relays burn the active sink's backlog down at least this fraction of
// their rate without them.
const besideTarget = 0.9

// besideRelays is how many relays burn the backlog down, as the issue's
// two serve processes.
const besideRelays = 2

// besideSide is one half of the burndown-beside scenario.
type besideSide struct {
	name    string
	waiting bool
}

var (
	sideAlone  = besideSide{name: "alone"}
	sideBeside = besideSide{name: "beside the waiting rows", waiting: true}
)

// besideRun is one burn-down of the scenario.
type besideRun struct {
	rate        float64 // msg/s, first delivery to last
	indexReads  int64   // index entries of the messages table read meanwhile
	waitingRows int
}

// runBurnDownBeside is scenario 8b, issue 42 item 4 end to end: two relays
// (every service a serve process runs: the stats snapshot, the
// unconfigured sinks' warning, pauses, maintenance) burn down besideActive
// rows of the active sink, alone and enqueued after besideWaiting rows of a
// paused sink and as many of a sink no relay has, alternating; the table
// is vacuumed and analyzed, checkpointed, and no relay has counted it
// before they start.
// outboxd only: River has no stats snapshot or unconfigured-sink service.
func (b *bench) runBurnDownBeside(ctx context.Context) error {
	runs := map[besideSide][]besideRun{}
	for run := range b.sz.pressureRuns {
		for _, side := range rotated([]besideSide{sideAlone, sideBeside}, run) {
			b.logf("  run %d, %s", run+1, side.name)
			r, err := b.burnDownBeside(ctx, side)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", run+1, side.name, err)
			}
			b.logf("    %.0f msg/s, %d index entries of messages read", r.rate, r.indexReads)
			runs[side] = append(runs[side], r)
		}
	}
	rates := func(side besideSide) []float64 {
		var out []float64
		for _, r := range runs[side] {
			out = append(out, r.rate)
		}
		return out
	}
	alone, beside := median(rates(sideAlone)), median(rates(sideBeside))
	ratio := beside / alone
	var w strings.Builder
	fmt.Fprintf(&w, "### burndown-beside: %d relays burn down %d rows alone and beside %d paused and %d unconfigured waiting rows\n\n",
		besideRelays, b.sz.besideActive, b.sz.besideWaiting, b.sz.besideWaiting)
	fmt.Fprintln(&w, "| run | alone (msg/s) | beside (msg/s) | beside ÷ alone | index entries read, alone / beside |")
	fmt.Fprintln(&w, "|---|---:|---:|---:|---:|")
	for i := range runs[sideAlone] {
		a, s := runs[sideAlone][i], runs[sideBeside][i]
		fmt.Fprintf(&w, "| %d | %.0f | %.0f | %.2f× | %d / %d |\n", i+1, a.rate, s.rate, s.rate/a.rate, a.indexReads, s.indexReads)
	}
	fmt.Fprintf(&w, "| median | %.0f | %.0f | %.2f× | |\n\n", alone, beside, ratio)
	fmt.Fprintf(&w, "Target: beside ≥ %.1f× alone: %s\n", besideTarget, passFail(ratio >= besideTarget))
	b.res.sections = append(b.res.sections, w.String())
	b.res.note("Burn-down beside waiting rows: the rate runs from the first delivery to the last; index entries read are pg_stat_user_indexes' idx_tup_read of outbox.messages over the burn-down (the waiting rows' insert and VACUUM (ANALYZE) before it excluded).")
	return nil
}

// burnDownBeside empties outboxd's table and its stats snapshot, adds the
// waiting rows (side.waiting) and then the active backlog, vacuums and
// analyzes, and lets besideRelays relays deliver the backlog, checking
// each row was.
func (b *bench) burnDownBeside(ctx context.Context, side besideSide) (besideRun, error) {
	s := b.stores[sysOutboxd.name]
	r := besideRun{}
	// No count of the table exists when the relays start, as on a first
	// start beside rows a producer or a restore wrote.
	if _, err := s.pool().Exec(ctx, `TRUNCATE outbox.sink_stats, outbox.sink_stats_lead, outbox.delivery_minutes`); err != nil {
		return r, err
	}
	if err := s.reset(ctx); err != nil {
		return r, err
	}
	if side.waiting {
		for _, sink := range []string{pausedSinkName, ghostSinkName} {
			if err := s.seedWaiting(ctx, sink, b.sz.besideWaiting); err != nil {
				return r, err
			}
		}
		r.waitingRows = 2 * b.sz.besideWaiting
	}
	// Paused on both sides, so that the pause itself is no difference.
	if err := s.pauseSink(ctx, pausedSinkName); err != nil {
		return r, fmt.Errorf("pause %s: %w", pausedSinkName, err)
	}
	n := b.sz.besideActive
	if err := enqueueBacklog(ctx, s, n); err != nil {
		return r, err
	}
	// The checkpoint writes the inserts' pages out now, on both sides, so
	// that the checkpointer does not write them during the burn-down
	// beside the waiting rows only.
	for _, stmt := range []string{"VACUUM (ANALYZE) " + s.table(), "CHECKPOINT"} {
		if _, err := s.pool().Exec(ctx, stmt); err != nil {
			return r, err
		}
	}
	rows, err := s.pool().Query(ctx, "SELECT id FROM "+s.table()+" WHERE sink = $1", noopSink)
	if err != nil {
		return r, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return r, err
	}
	reads0, err := messagesIndexReads(ctx, s)
	if err != nil {
		return r, err
	}
	run, err := b.drive(relayOpts{sys: sysOutboxd, count: besideRelays, expect: n, pausedSink: true}, func(procs []*relayProc, _ int64) error {
		return waitDelivered(procs, n, b.sz.drain)
	})
	if err != nil {
		return r, err
	}
	if _, err := run.verify(ids); err != nil {
		return r, err
	}
	// The relays' backends have exited, and with them reported what they
	// read.
	reads1, err := messagesIndexReads(ctx, s)
	if err != nil {
		return r, err
	}
	r.rate = perSecond(n, run.lastDeliveryNs()-run.goNs)
	r.indexReads = reads1 - reads0
	return r, nil
}

// messagesIndexReads is the index entries read from outboxd's messages
// table so far, by the server's statistics.
func messagesIndexReads(ctx context.Context, s store) (int64, error) {
	var n int64
	err := s.pool().QueryRow(ctx, `SELECT coalesce(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes
		WHERE schemaname = 'outbox' AND relname = 'messages'`).Scan(&n)
	return n, err
}
