package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// historySlotsPerRetention is how many history slots (partitions of
	// messages_history, migration 013) one retention spans: the current
	// slot rotates every retention / historySlotsPerRetention, and a
	// closed slot is truncated once the retention has passed since it
	// closed. A delivered row is kept between the retention and 1.25
	// times it, and the ring holds about six slots.
	historySlotsPerRetention = 4
	// minHistorySlotWidth bounds the rotation for a very short retention
	// (tests): a slot per second at most.
	minHistorySlotWidth = time.Second
	// historyLockWait bounds how long a rotation or truncation waits for
	// a lock on the history table: a session holding it (a long reader)
	// puts the change off to the next round instead of queueing the
	// lookups behind it.
	historyLockWait = 200 * time.Millisecond
	// deleteBatch bounds one retention DELETE, so pruning a large backlog
	// never holds locks or bloats WAL in one go.
	deleteBatch = 5000
)

// historySlotWidth is how long a history slot stays current for a
// retention.
func historySlotWidth(retention time.Duration) time.Duration {
	return max(retention/historySlotsPerRetention, minHistorySlotWidth)
}

// History keeps delivered rows (messages_history) for their retention: on
// the leading relay, every interval, it rotates the current history slot,
// truncates every slot whose rows have all outlived the retention (after
// deleting their keys, so their dedup keys may be enqueued again), and
// moves sent rows stored before migration 013 out of messages.
type History struct {
	runner
	env       Env
	leader    *Leader
	interval  time.Duration
	retention time.Duration
}

// NewHistory returns the history kept for retention, a round every
// interval (the relay's MaintenanceInterval) while leader leads.
func NewHistory(env Env, leader *Leader, interval, retention time.Duration) *History {
	return &History{env: env, leader: leader, interval: interval, retention: retention}
}

// Start keeps history until ctx ends or Stop.
func (h *History) Start(ctx context.Context) {
	h.start(ctx, func(ctx context.Context) {
		afterElection(ctx, h.leader, h.interval, h.round)
	})
}

// round does one round and logs what it did.
func (h *History) round(ctx context.Context) {
	moved, expired, err := h.keep(ctx)
	if err != nil && ctx.Err() == nil {
		h.env.Logger.Warn("outbox: could not rotate or truncate delivered history", "error", err)
	}
	if moved > 0 || expired > 0 {
		h.env.Logger.Info("outbox: pruned delivered messages", "moved", moved, "expired", expired, "retention", h.retention)
	}
	h.env.Signals.EmitHistoryKept(moved + expired)
}

// keep rotates, truncates and moves (see History) and returns how many
// sent rows left messages and how many history rows were truncated.
func (h *History) keep(ctx context.Context) (moved, expired int64, err error) {
	conn, err := h.env.DB.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	// Whether it rotated matters to no one: a slot put off rotates next round.
	if _, err = h.env.Q.HistoryRotate(ctx, conn, historySlotWidth(h.retention), historyLockWait); err != nil {
		return 0, 0, fmt.Errorf("rotate the history slot: %w", err)
	}
	if expired, err = h.expire(ctx, conn); err != nil {
		return 0, expired, err
	}
	// Last: after an upgrade of a large outbox this takes many batches
	// (1M rows: minutes), once, and the slots keep rotating meanwhile.
	if moved, err = pruneInBatches(ctx, conn, h.env.Q.PruneSent, h.retention); err != nil {
		return moved, expired, fmt.Errorf("move sent rows stored before migration 013: %w", err)
	}
	return moved, expired, nil
}

// expire truncates every history slot whose rows have all outlived the
// retention, after deleting their keys, and returns how many rows they
// held.
func (h *History) expire(ctx context.Context, conn *pgxpool.Conn) (int64, error) {
	var expired int64
	for {
		slot, err := h.env.Q.HistoryExpiring(ctx, conn, h.retention)
		if err != nil {
			return expired, fmt.Errorf("find an expired history slot: %w", err)
		}
		if slot == nil {
			return expired, nil
		}
		rows, err := h.expireSlot(ctx, conn, *slot)
		expired += rows
		if err != nil {
			return expired, err
		}
		truncated, err := h.env.Q.HistoryTruncate(ctx, conn, *slot, historyLockWait)
		if err != nil {
			return expired, fmt.Errorf("truncate history slot %d: %w", *slot, err)
		}
		if !truncated {
			// Held by another session; the slot stays expiring and the
			// next round (its keys gone already) tries again.
			return expired, nil
		}
	}
}

// expireSlot deletes the keys and failed attempts of an expiring slot's
// rows in batches and returns how many rows it went through.
func (h *History) expireSlot(ctx context.Context, conn *pgxpool.Conn, slot int32) (int64, error) {
	var after, total int64
	for {
		batch, err := h.env.Q.ExpireHistoryKeys(ctx, conn, slot, after, deleteBatch)
		if err != nil {
			return total, fmt.Errorf("delete the keys of history slot %d: %w", slot, err)
		}
		total += batch.Rows
		after = batch.LastID
		if batch.Rows < deleteBatch {
			return total, nil
		}
	}
}
