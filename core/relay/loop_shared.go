package relay

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/outboxd/outboxd/core/internal/fairshare"
	"github.com/outboxd/outboxd/core/internal/slots"
)

// sharedLoopSinkShare is the part of the shared loop's slots one sink may
// hold. A sink that hangs until its deadline then leaves the rest to the
// other sinks of the loop instead of stalling them.
const sharedLoopSinkShare = 0.75

// claimWhenFree is the part of a claim loop's slots that must be free
// before it claims again: claiming as soon as one slot frees up would turn
// a busy relay's claims into one-row statements. It equals the part no
// single sink of the shared loop may hold, so a hanging sink cannot keep
// that loop from claiming for the others.
const claimWhenFree = 1 - sharedLoopSinkShare

// sinkStallAfter is how long a sink that fills its share must go without
// finishing a delivery before the shared loop stops claiming its rows. A
// busy but fast sink always fills its share too; leaving it out of claims
// would make the claim filter its whole backlog and come back empty.
const sinkStallAfter = time.Second

// claimAheadShareOfLease bounds how long claimed rows may wait in the relay
// for a free slot: rows claimed beyond the free slots must all start within
// this part of their lease at the pace deliveries currently finish.
const claimAheadShareOfLease = 0.25

// Rows claimed beyond the free slots wait in the relay, in their sinks'
// queues: at most claimAheadBatches batches of them (fewer when the pace
// says fewer can start soon), so that the next claim returns before the
// queues run dry. The loop claims again once they are down to one batch. A
// relay that claimed further ahead held rows another relay could have
// delivered (a second relay added nothing to a burn-down), and every claim
// had to pass over them at the head of the open index.
const claimAheadBatches = 2

// sharedLoop claims for every sink without a loop of its own: one
// statement claims a batch across them.
func (r *Relay) sharedLoop(ctx, deliverCtx context.Context, w *waiter) {
	n := r.cfg.Concurrency
	free := slots.New(n, int(float64(n)*claimWhenFree))
	pace := slots.NewPace(free, time.Duration(float64(r.cfg.Lease)*claimAheadShareOfLease))
	shares := fairshare.New[*claimedRow](int(float64(n)*sharedLoopSinkShare), sinkStallAfter)
	size := newClaimSize(r.cfg.MaxClaimBytes)
	order := newClaimOrder()
	if !r.register(ctx, w) {
		return
	}
	for ctx.Err() == nil {
		available := free.WaitFree(ctx)
		if available == 0 {
			return
		}
		stalled := shares.Stalled()
		claimable := claimableSinks(w.sinks, r.limiter.PausedSinks(), stalled)
		if len(claimable) == 0 {
			r.idle(ctx, w, w.idleFor(r.cfg.PollInterval), free.Freed())
			continue
		}
		queued := shares.Queued(stalled)
		// A batch is as many rows as MaxClaimBytes holds: large payloads
		// make every claim, and the rows waiting, fewer.
		batch := size.rows(r.cfg.BatchSize)
		limit := min(available+min(pace.Ahead(n), claimAheadBatches*batch)-queued, batch)
		if limit < 1 || queued > (claimAheadBatches-1)*batch {
			// Enough rows wait in the relay: claim again as they start.
			select {
			case <-ctx.Done():
			case <-shares.Dequeued():
			case <-free.Freed():
			}
			continue
		}
		claimable = order.sorted(claimable)
		rows, err := r.claim(ctx, w, limit, claimable)
		if err != nil {
			r.claimFailed(ctx, w, err)
			continue
		}
		size.observe(rows)
		order.observe(claimable, rows)
		for _, row := range rows {
			// A row whose sink already fills its share of the slots (it
			// may be hanging) waits in its sink's queue, off the loop, so
			// rows of other sinks behind it are not held up.
			if shares.AcquireOrQueue(row.Sink, row) {
				free.Take()
				r.deliverShared(deliverCtx, row, shares, free)
			}
		}
		full := len(rows) == limit
		w.claimed(full)
		switch {
		case len(stalled) > 0 && !full:
			// The rows left may belong to the stalled sinks: look again
			// as soon as a delivery finishes, not at the next poll.
			r.idle(ctx, w, w.idleFor(r.cfg.PollInterval), free.Freed())
		case !full:
			r.idle(ctx, w, w.idleFor(r.cfg.PollInterval), nil)
		}
	}
}

// claimableSinks is sinks without the paused and the stalled ones.
func claimableSinks(sinks, paused, stalled []string) []string {
	if len(paused) == 0 && len(stalled) == 0 {
		return sinks
	}
	return slices.DeleteFunc(slices.Clone(sinks), func(s string) bool {
		return slices.Contains(paused, s) || slices.Contains(stalled, s)
	})
}

// deliverShared delivers row, which holds a share of its sink and a slot,
// in a goroutine that then goes on with the sink's queued rows while there
// are any (a lane). Its share and slot are given back when the queue is
// empty, or early when a delivery overruns its deadline (see deliver): the
// next queued row then starts in a lane of its own. Once ctx is done,
// queued rows are handed back instead of delivered.
func (r *Relay) deliverShared(ctx context.Context, row *claimedRow, shares *fairshare.Shares[*claimedRow], free *slots.Slots) {
	r.deliveries.Add(1)
	l := &sharedLane{relay: r, ctx: ctx, shares: shares, free: free, sink: row.Sink, row: row}
	l.releaseFunc = l.releaseEarly // bound once per lane, not per delivery
	go l.run()
}

// sharedLane is the goroutine delivering one sink's rows in turn, holding
// one share and one slot.
type sharedLane struct {
	relay       *Relay
	ctx         context.Context
	shares      *fairshare.Shares[*claimedRow]
	free        *slots.Slots
	sink        string      // whose share the lane holds
	row         *claimedRow // the row being delivered; only the lane's goroutine reads it
	releaseFunc func()      // releaseEarly
	// owned is set by whichever comes first, the early release or the
	// end of the delivery: that one owns the share and slot.
	owned atomic.Bool
}

func (l *sharedLane) run() {
	r := l.relay
	defer r.deliveries.Done()
	for {
		freed := false
		if l.ctx.Err() != nil {
			r.release(l.row, 0, errors.New("relay shut down while the row waited for its sink's share of the slots"))
		} else {
			freed = r.deliver(l.ctx, l.row, permit{}, l.releaseFunc)
		}
		if !l.owned.CompareAndSwap(false, true) {
			return // released early; the share went on without us
		}
		next, ok := l.shares.HandOver(l.sink)
		if !ok {
			l.free.Give()
			return
		}
		if freed {
			// An early release started and lost to the delivery's end:
			// it reads this lane's row and flag, so the next row goes on
			// in a lane of its own, holding this lane's share and slot.
			r.deliverShared(l.ctx, next, l.shares, l.free)
			return
		}
		l.row = next
		l.owned.Store(false)
	}
}

// releaseEarly gives the lane's slot back while its sink still runs past
// the deadline, and hands its share to the sink's next queued row.
func (l *sharedLane) releaseEarly() {
	if l.owned.CompareAndSwap(false, true) {
		l.free.Give()
		if next, ok := l.shares.HandOver(l.sink); ok {
			l.free.Take()
			l.relay.deliverShared(l.ctx, next, l.shares, l.free)
		}
	}
}
