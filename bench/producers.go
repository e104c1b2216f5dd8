package main

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The offered load of the pressure, stepped and soak scenarios is written
// the way applications write: single-message transactions on some
// connections and batches on others, at the same time.
const (
	singleProducers = 4
	batchProducers  = 4
	// singleShareMax bounds the msg/s written as single-message
	// transactions (half the offered load up to this); the rest goes in
	// batches. One connection commits about 1,300 single-message
	// transactions a second on the development machines, so four stay
	// well within it.
	singleShareMax = 800
	// batchTick is how often a batch producer writes what it owes.
	batchTick = 20 * time.Millisecond
	// producerBatchMax bounds one batch; a producer that owes more (it
	// fell behind) drops the rest, so what it offers is what it managed.
	producerBatchMax = 1000
)

// commit is one enqueued message: its id and when its transaction's commit
// returned (Unix ns, wall clock, as the relay children record deliveries).
type commit struct {
	ID, Ns int64
}

// producers write one engine's offered load until stopped; the rate can
// change while they run.
type producers struct {
	s        store
	rate     atomic.Int64 // msg/s offered in total
	produced atomic.Int64
	record   bool // keep every commit (the soak only counts)
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	logs     [][]commit // one per producer
}

// startProducers starts the producers at rate msg/s.
func startProducers(ctx context.Context, s store, rate int, record bool) *producers {
	ctx, cancel := context.WithCancel(ctx)
	p := &producers{s: s, record: record, cancel: cancel, logs: make([][]commit, singleProducers+batchProducers)}
	p.rate.Store(int64(rate))
	for i := range singleProducers {
		p.wg.Go(func() { p.fail(p.single(ctx, i)) })
	}
	for i := range batchProducers {
		p.wg.Go(func() { p.fail(p.batches(ctx, singleProducers+i)) })
	}
	return p
}

func (p *producers) setRate(rate int) { p.rate.Store(int64(rate)) }

// singleRate is the share of rate written one message per transaction.
func singleRate(rate int64) int64 { return min(rate/2, singleShareMax) }

func (p *producers) single(ctx context.Context, slot int) error {
	due := time.Now()
	for ctx.Err() == nil {
		share := singleRate(p.rate.Load()) / singleProducers
		if share == 0 {
			if !sleepCtx(ctx, batchTick) {
				return nil
			}
			due = time.Now()
			continue
		}
		interval := time.Second / time.Duration(share)
		// A producer that fell behind does not catch up in a burst.
		if due = due.Add(interval); time.Since(due) > interval {
			due = time.Now()
		}
		if !sleepCtx(ctx, time.Until(due)) {
			return nil
		}
		var id int64
		// The transaction itself is not cut by stop: a commit that
		// succeeded must be recorded, or its delivery looks unknown.
		tctx := context.WithoutCancel(ctx)
		err := inTx(tctx, p.s, func(tx pgx.Tx) error {
			var err error
			id, err = p.s.enqueueOne(tctx, tx)
			return err
		})
		if err != nil {
			return err
		}
		p.committed(slot, []int64{id})
	}
	return nil
}

func (p *producers) batches(ctx context.Context, slot int) error {
	last := time.Now()
	owed := 0.0
	for sleepCtx(ctx, batchTick) {
		now := time.Now()
		rate := p.rate.Load()
		owed += float64(rate-singleRate(rate)) / batchProducers * now.Sub(last).Seconds()
		last = now
		n := min(int(owed), producerBatchMax)
		if owed -= float64(n); owed > producerBatchMax {
			owed = 0
		}
		if n == 0 {
			continue
		}
		var ids []int64
		tctx := context.WithoutCancel(ctx) // as in single
		err := inTx(tctx, p.s, func(tx pgx.Tx) error {
			var err error
			ids, err = p.s.enqueueBatchIDs(tctx, tx, n)
			return err
		})
		if err != nil {
			return err
		}
		p.committed(slot, ids)
	}
	return nil
}

func (p *producers) committed(slot int, ids []int64) {
	p.produced.Add(int64(len(ids)))
	if !p.record {
		return
	}
	ns := time.Now().UnixNano()
	for _, id := range ids {
		p.logs[slot] = append(p.logs[slot], commit{ID: id, Ns: ns})
	}
}

func (p *producers) fail(err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	p.err = errors.Join(p.err, err)
	p.mu.Unlock()
}

// stop ends the producers and returns every commit, in commit order, and
// the first error a producer met.
func (p *producers) stop() ([]commit, error) {
	p.cancel()
	p.wg.Wait()
	all := slices.Concat(p.logs...)
	slices.SortFunc(all, func(a, b commit) int { return cmp.Compare(a.Ns, b.Ns) })
	return all, p.err
}

// idsOf lists the ids of commits.
func idsOf(commits []commit) []int64 {
	ids := make([]int64, len(commits))
	for i, c := range commits {
		ids[i] = c.ID
	}
	return ids
}

// stopped hides the error of a transaction the producers' own stop cut.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// sleepCtx sleeps d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(max(d, 0)):
		return ctx.Err() == nil
	}
}
