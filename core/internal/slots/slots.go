// Package slots bounds the concurrent deliveries of one claim loop and sizes
// its claims from how fast those deliveries finish.
package slots

import (
	"context"
	"sync/atomic"
	"time"
)

// Slots is a counting semaphore with a "one was freed" signal: a claim loop
// takes a slot per delivery it starts and waits until enough are free to
// make the next claim worthwhile.
type Slots struct {
	sem      chan struct{}
	freed    chan struct{}
	enough   int
	finished atomic.Int64 // deliveries finished, for Pace
}

// New returns n slots; WaitFree returns once at least enough of them are
// free (at least 1).
func New(n, enough int) *Slots {
	return &Slots{sem: make(chan struct{}, n), freed: make(chan struct{}, 1), enough: max(1, enough)}
}

// Size is the number of slots.
func (s *Slots) Size() int { return cap(s.sem) }

// WaitFree blocks until enough slots are free and returns how many are
// (0 when ctx is done). Claiming as soon as one slot frees up would turn a
// busy relay's claims into one-row statements.
func (s *Slots) WaitFree(ctx context.Context) int {
	for {
		if free := cap(s.sem) - len(s.sem); free >= s.enough {
			return free
		}
		select {
		case <-ctx.Done():
			return 0
		case <-s.freed:
		}
	}
}

// Take occupies a slot; the caller must know one is free (see WaitFree).
func (s *Slots) Take() { s.sem <- struct{}{} }

// Give frees a slot and signals Freed.
func (s *Slots) Give() {
	s.finished.Add(1)
	<-s.sem
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// Freed receives a value after a slot was freed (at most one pending).
func (s *Slots) Freed() <-chan struct{} { return s.freed }

// ForgetFreed drops a pending value of Freed: a caller about to count the
// room its slots leave calls it, so that Freed then says a slot was freed
// after that count, not before.
func (s *Slots) ForgetFreed() {
	select {
	case <-s.freed:
	default:
	}
}

// Pace sizes a claim loop's prefetch from how fast its deliveries finish: a
// fast sink gets full batches (one statement per batch of rows), a slow one
// only what it can start well inside the lease.
type Pace struct {
	slots  *Slots
	window time.Duration
	last   time.Time
	done   int64
}

// NewPace measures the deliveries finished on s. Rows claimed beyond the
// free slots must all be able to start within window at the current pace.
func NewPace(s *Slots, window time.Duration) *Pace {
	return &Pace{slots: s, window: window, last: time.Now()}
}

// Ahead returns how many rows beyond the free slots to claim now: at least
// minimum (one round of slots), more when deliveries finish fast enough to
// start them within the window. It is not safe for concurrent use: one
// claim loop calls it before each claim.
func (p *Pace) Ahead(minimum int) int {
	now, done := time.Now(), p.slots.finished.Load()
	rate := float64(done-p.done) / now.Sub(p.last).Seconds()
	p.last, p.done = now, done
	return max(minimum, int(rate*p.window.Seconds()))
}
