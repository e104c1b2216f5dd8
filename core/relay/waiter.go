package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/outboxd/outboxd/core/internal/connretry"
)

// Wake-up registration of claim loops (migration 006): each loop has a
// notification channel of its own and a row in waiters naming it and its
// sinks; producers wake one loop that waits for their sink's rows.
const (
	// waiterChannelPrefix starts every loop's channel; the rest is random,
	// so loops of independent outboxes in one database never share one.
	waiterChannelPrefix = "outboxd_"
	// waiterAlivePolls is how many poll intervals a loop's registration
	// outlives its last claim: an idle loop claims once per poll interval,
	// so only a loop whose relay died lets it lapse. Wake-ups addressed to
	// such a loop are lost until then; its rows are claimed by the other
	// relays' polls.
	waiterAlivePolls = 3
	// waiterAliveMin is the least a registration outlives a claim.
	waiterAliveMin = 5 * time.Second
	// wakeRaceWindow is how soon a loop claims again after its claims
	// stopped being full, and after it registered. While it was busy (or
	// not yet registered) producers did not wake it; one whose statement
	// saw it so may commit just after the loop's last claim, and this
	// claim picks its row up. (A producer that commits later than that
	// waits for a poll.)
	wakeRaceWindow = 50 * time.Millisecond
	// waiterPruneAfter is how long registrations of dead relays are kept
	// before maintenance deletes them.
	waiterPruneAfter = time.Hour
)

// waiter is one claim loop's registration, and what the loop knows about
// the wake-ups it may have missed.
type waiter struct {
	channel string
	sinks   []string
	wake    <-chan struct{}
	id      int64 // 0 until registered

	busy    bool      // the last claim was full: producers did not wake it
	recheck time.Time // claim again by then, whatever wakes the loop first
	// retries paces the loop's retries of failed claims (see
	// claimFailed); nil after a claim that succeeded.
	retries *connretry.Pooled
	bounds  claimBounds // where its claims start reading each sink
	// looking says a lookout (see lookAside) runs; it reports on
	// lookouts, and the loop waits for it on lookoutRunning before it ends.
	looking        bool
	lookouts       chan lookout
	lookoutRunning sync.WaitGroup
}

// claimed records whether a claim got all the rows it asked for. When the
// loop's claims stop being full it must claim once more wakeRaceWindow
// later (see there).
func (w *waiter) claimed(full bool) {
	if w.busy && !full {
		w.recheck = time.Now().Add(wakeRaceWindow)
	}
	w.busy = full
}

// waitForWakeups has producers wake w, whose last claim may have been full,
// while it waits for its blocked rate keys (see keyedClaims): such a wait
// lasts up to keyBlockedRecheck, longer than a poll interval, and rows of
// other keys would wait for its end. A producer whose statement saw the
// loop busy just before waits for that end (keyBlockedRecheck, no more).
func (r *Relay) waitForWakeups(ctx context.Context, w *waiter) {
	if !w.busy {
		return
	}
	if err := r.q.WaiterWaits(ctx, r.db, w.id); err != nil {
		r.logger.Debug("outbox: could not mark a claim loop waiting; producers' rows wait for its next claim", "error", err)
		return
	}
	w.busy = false
}

// idleFor is how long the loop waits for a wake-up: poll, or less when a
// claim is due sooner. A wake-up that ends the wait early does not cancel
// the due claim: it may come from before the moment the claim must follow.
func (w *waiter) idleFor(poll time.Duration) time.Duration {
	if until := time.Until(w.recheck); until > 0 {
		return min(until, poll)
	}
	return poll
}

// newWaiter makes the registration of a loop claiming for sinks and
// subscribes it to the listener; Run calls it before the listener starts.
func (r *Relay) newWaiter(sinks []string) *waiter {
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix) // never fails (crypto/rand)
	w := &waiter{channel: waiterChannelPrefix + hex.EncodeToString(suffix), sinks: sinks}
	w.wake = r.listener.Subscribe(w.channel)
	return w
}

// aliveFor is how long a loop's registration outlives each claim.
func (r *Relay) aliveFor() time.Duration {
	return max(waiterAliveMin, waiterAlivePolls*r.cfg.PollInterval)
}

// register records w in the database once the listener LISTENs on its
// channel (or a poll interval has passed: a loop without wake-ups still
// polls). It returns false when ctx ended first.
func (r *Relay) register(ctx context.Context, w *waiter) bool {
	select {
	case <-r.listener.Ready():
	case <-ctx.Done():
		return false
	case <-time.After(r.cfg.PollInterval):
	}
	for ctx.Err() == nil {
		id, err := r.q.RegisterWaiter(ctx, r.db, w.channel, w.sinks, r.aliveFor())
		if err == nil {
			w.id, w.retries = id, nil
			// Producers whose statements ran before this did not wake it.
			w.recheck = time.Now().Add(wakeRaceWindow)
			return true
		}
		r.claimFailed(ctx, w, fmt.Errorf("outbox: register for wake-ups: %w", err))
	}
	return false
}

// unregister removes the registrations of the loops of a relay that stops,
// so that producers stop addressing them at once.
func (r *Relay) unregister(waiters []*waiter) {
	var ids []int64
	for _, w := range waiters {
		if w.id != 0 {
			ids = append(ids, w.id)
		}
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimRetryDelay)
	defer cancel()
	if err := r.q.UnregisterWaiters(ctx, r.db, ids); err != nil {
		r.logger.Warn("outbox: could not unregister the relay's claim loops; they lapse on their own", "error", err)
	}
}
