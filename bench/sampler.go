package main

import (
	"context"
	"sync"
	"time"
)

// sample is what a sampler saw at one moment of a session.
type sample struct {
	Ns    int64
	Depth int64 // messages enqueued and not yet delivered
	Dead  int64 // n_dead_tup summed over the engine's hot tables
}

// sampler records a session's queue depth and dead tuples every so often,
// from the parent (the relays measure nothing for it).
type sampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []sample
	err     error
}

// startSampler samples every interval until stopped: depth says how many
// messages wait (from the producers' and the relays' counts, so sampling
// costs the database only the statistics view's read).
func startSampler(ctx context.Context, s store, tables []string, depth func() int64, every time.Duration) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	sm := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		for {
			_, dead, err := tupleCounts(ctx, s, tables)
			if err != nil {
				if ctx.Err() == nil {
					sm.err = err
				}
				return
			}
			sm.mu.Lock()
			sm.samples = append(sm.samples, sample{Ns: time.Now().UnixNano(), Depth: max(0, depth()), Dead: dead})
			sm.mu.Unlock()
			if !sleepCtx(ctx, every) {
				return
			}
		}
	}()
	return sm
}

// stop ends sampling and returns the samples and the error that ended it
// early, if any.
func (sm *sampler) stop() ([]sample, error) {
	sm.cancel()
	<-sm.done
	return sm.samples, sm.err
}

// between returns the samples taken in [from, to).
func between(samples []sample, from, to int64) []sample {
	var out []sample
	for _, s := range samples {
		if s.Ns >= from && s.Ns < to {
			out = append(out, s)
		}
	}
	return out
}

// maxOf returns the largest f(s) over samples (0 for none).
func maxOf(samples []sample, f func(sample) int64) int64 {
	var m int64
	for _, s := range samples {
		m = max(m, f(s))
	}
	return m
}
