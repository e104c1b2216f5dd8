// Package relaysignal is the relay's observation seam: what a relay did (an
// outcome written, a claim made, the listener connected, a breaker opened),
// sent to whoever put a [Relay] into the context passed to relay.Relay.Run.
// Tests use it to wait on what the relay did instead of polling the
// database or sleeping; outside tests the context holds none and every
// signal is a no-op that costs a nil check.
//
// It is production code (the relay imports it), not test support: it
// imports neither package testing nor anything of internal/testkit, and
// Wait takes the small [TB] interface instead. It is internal to the
// module, so it adds nothing to the public API.
package relaysignal

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// TB is the part of testing.TB that Wait uses (declared here so the relay,
// which imports this package, does not link package testing).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Relay holds the signals one relay (or several sharing it) sends.
type Relay struct {
	// Written gets every outcome once its terminal write finished: written
	// (the row changed) or not (a zombie's late completion).
	Written Signal[Outcome]
	// Claimed gets the number of rows of every claim that returned rows.
	Claimed Signal[int]
	// Listening gets a value each time the listener (re)connected and
	// LISTENs.
	Listening Signal[struct{}]
	// Idle gets a value each time a claim loop starts waiting for work: its
	// claim before came back short, so the loop is registered as waiting
	// and an enqueue from now on wakes it.
	Idle Signal[struct{}]
	// UnconfiguredSinks gets each report of sinks with waiting rows that
	// the relay does not have.
	UnconfiguredSinks Signal[[]string]
	// Maintained gets, once each maintenance round the relay led is over,
	// the number of audit entries, digests and threads it pruned.
	Maintained Signal[int64]
	// HistoryKept gets, once each round of delivered history the relay
	// led is over, the number of sent rows it took out of messages or
	// truncated from messages_history (0 when there were none).
	HistoryKept Signal[int64]
	// PausesLoaded gets a value each time the relay loaded the cluster's
	// sink pauses from the database.
	PausesLoaded Signal[struct{}]

	// BeforeReserve, when set, is called with the sink's name between a
	// throttled loop's claim and its permit reservation, in the loop's
	// goroutine: a test commits a pause there to hit that window every
	// time. Set it before Run.
	BeforeReserve func(sink string)

	// Breaker gets each circuit breaker this relay opened or closed.
	Breaker Signal[BreakerChange]
}

// BreakerChange is a circuit breaker a relay opened (Open) or closed.
type BreakerChange struct {
	Sink, Key string
	Open      bool
}

// Outcome is one delivery's terminal write.
type Outcome struct {
	ID      int64
	Sink    string
	Status  string // the status written: sent, failed, pending, dead
	Written bool   // false: a zombie's, nothing changed
}

type relayKey struct{}

// WithRelay returns ctx carrying r, for relay.Relay.Run.
func WithRelay(ctx context.Context, r *Relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

// FromContext returns the Relay in ctx, or nil (whose signals are no-ops).
func FromContext(ctx context.Context) *Relay {
	r, _ := ctx.Value(relayKey{}).(*Relay)
	return r
}

// Signal records every value sent on it, so a waiter never misses one that
// came before it started waiting, and the sender never blocks.
type Signal[T any] struct {
	mu      sync.Mutex
	values  []T
	changed chan struct{} // closed and replaced on every Send
}

// Send records v. It is a no-op on a nil Relay's signals (see Emit).
func (s *Signal[T]) Send(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, v)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// All returns a copy of every value sent so far.
func (s *Signal[T]) All() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]T(nil), s.values...)
}

// Wait blocks until cond holds for the values sent so far, failing the test
// with what when timeout passes first. cond is called again after every
// Send, never concurrently.
func (s *Signal[T]) Wait(t TB, timeout time.Duration, what string, cond func(all []T) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		values := s.values
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if cond(values) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s (%d signals: %s)", timeout, what, len(values), summary(values))
		}
	}
}

func summary[T any](values []T) string {
	if len(values) > 5 {
		return fmt.Sprintf("%v ...", values[len(values)-5:])
	}
	return fmt.Sprint(values)
}

// The emitters below are what the relay calls: each is a no-op when r is
// nil, so production code pays one nil check per event.

// EmitWritten sends o on r.Written.
func (r *Relay) EmitWritten(o Outcome) {
	if r != nil {
		r.Written.Send(o)
	}
}

// EmitClaimed sends n on r.Claimed.
func (r *Relay) EmitClaimed(n int) {
	if r != nil {
		r.Claimed.Send(n)
	}
}

// EmitListening sends on r.Listening.
func (r *Relay) EmitListening() {
	if r != nil {
		r.Listening.Send(struct{}{})
	}
}

// EmitIdle sends on r.Idle.
func (r *Relay) EmitIdle() {
	if r != nil {
		r.Idle.Send(struct{}{})
	}
}

// EmitPausesLoaded sends on r.PausesLoaded.
func (r *Relay) EmitPausesLoaded() {
	if r != nil {
		r.PausesLoaded.Send(struct{}{})
	}
}

// EmitBeforeReserve calls r.BeforeReserve, if any, with sink.
func (r *Relay) EmitBeforeReserve(sink string) {
	if r != nil && r.BeforeReserve != nil {
		r.BeforeReserve(sink)
	}
}

// EmitMaintained sends pruned on r.Maintained.
func (r *Relay) EmitMaintained(pruned int64) {
	if r != nil {
		r.Maintained.Send(pruned)
	}
}

// EmitHistoryKept sends rows on r.HistoryKept.
func (r *Relay) EmitHistoryKept(rows int64) {
	if r != nil {
		r.HistoryKept.Send(rows)
	}
}

// EmitUnconfiguredSinks sends sinks on r.UnconfiguredSinks.
func (r *Relay) EmitUnconfiguredSinks(sinks []string) {
	if r != nil {
		r.UnconfiguredSinks.Send(sinks)
	}
}

// EmitBreaker sends a change of the breaker of (sink, key) on r.Breaker.
func (r *Relay) EmitBreaker(sink, key string, open bool) {
	if r != nil {
		r.Breaker.Send(BreakerChange{Sink: sink, Key: key, Open: open})
	}
}

// CountWritten counts the written outcomes with the given status (any
// status when status is "").
func CountWritten(all []Outcome, status string) int {
	return CountWrittenTo(all, "", status)
}

// CountWrittenTo counts the written outcomes of sink (any sink when sink is
// "") with the given status (any status when status is "").
func CountWrittenTo(all []Outcome, sink, status string) int {
	n := 0
	for _, o := range all {
		if o.Written && (sink == "" || o.Sink == sink) && (status == "" || o.Status == status) {
			n++
		}
	}
	return n
}

// WaitWritten waits until at least n outcomes of sink (any sink when "")
// with status (any status when "") have been written, failing t after
// timeout, and returns every outcome sent so far. Since a row is sent or
// dead only once, n sent outcomes mean n rows delivered and recorded.
func (r *Relay) WaitWritten(t TB, timeout time.Duration, sink, status string, n int) []Outcome {
	t.Helper()
	what := fmt.Sprintf("%d outcomes written", n)
	if status != "" {
		what = fmt.Sprintf("%d rows written %s", n, status)
	}
	if sink != "" {
		what += " for sink " + sink
	}
	r.Written.Wait(t, timeout, what, func(all []Outcome) bool { return CountWrittenTo(all, sink, status) >= n })
	return r.Written.All()
}

// WaitZombie waits until a written outcome turned out to be a zombie's
// (its row was re-claimed meanwhile, so nothing changed).
func (r *Relay) WaitZombie(t TB, timeout time.Duration) {
	t.Helper()
	r.Written.Wait(t, timeout, "a zombie's late completion", func(all []Outcome) bool {
		for _, o := range all {
			if !o.Written {
				return true
			}
		}
		return false
	})
}

// WaitCount waits until s has had at least n values.
func (s *Signal[T]) WaitCount(t TB, timeout time.Duration, what string, n int) {
	t.Helper()
	s.Wait(t, timeout, what, func(all []T) bool { return len(all) >= n })
}
