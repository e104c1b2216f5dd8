package relay

import (
	"context"
	"time"

	"github.com/outboxd/outboxd/internal/store"
)

// lookout is what a claim loop's lookout found (see lookAside).
type lookout struct {
	start time.Time
	took  time.Duration
	found map[string]time.Time // the oldest passed-over row's available_at, by sink
	err   error
}

// lookAside starts a lookout for the loop w: the rows of sinks that
// bounded claims starting at before (aligned with sinks; the zero time for
// a sink whose claims read from the start) pass over
// (sql/passed_over.sql), looked for on a connection of its own while the
// loop goes on claiming. A full claim reads the same entries, all those a
// transaction held open keeps in the open index; run as the loop's claim,
// it held every row committed meanwhile. One lookout runs per loop at a
// time; the loop waits for it before it ends.
func (r *Relay) lookAside(ctx context.Context, w *waiter, sinks []string, before []time.Time) {
	if w.looking {
		return
	}
	var p store.PassedOverParams
	for i, s := range sinks {
		if !before[i].IsZero() {
			p.Sinks, p.Before = append(p.Sinks, s), append(p.Before, before[i])
		}
	}
	if len(p.Sinks) == 0 {
		return
	}
	if w.lookouts == nil {
		w.lookouts = make(chan lookout, 1)
	}
	w.looking = true
	w.lookoutRunning.Go(func() {
		l := lookout{start: time.Now()}
		rows, err := r.q.PassedOver(ctx, r.db, p)
		l.took, l.err = time.Since(l.start), err
		for _, row := range rows {
			if l.found == nil {
				l.found = make(map[string]time.Time, len(rows))
			}
			l.found[row.Sink] = row.AvailableAt
		}
		w.lookouts <- l
	})
}

// collectLookout takes in the loop's lookout when it has ended: its rows
// start the next claims' walks of their sinks. A lookout that failed is
// logged and the next due one runs again.
func (r *Relay) collectLookout(ctx context.Context, w *waiter) {
	if !w.looking {
		return
	}
	select {
	case l := <-w.lookouts:
		w.looking = false
		if l.err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("outbox: looking for rows claims passed over failed; looking again at the next full claim", "error", l.err)
			}
			return
		}
		w.bounds.lookedOut(l.start, l.took, l.found)
	default:
	}
}
