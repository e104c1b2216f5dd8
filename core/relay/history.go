package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// historySlotsPerRetention is how many history slots (partitions of
	// messages_history, migration 013) one retention spans: the current
	// slot rotates every SentRetention / historySlotsPerRetention, and a
	// closed slot is truncated once SentRetention has passed since it
	// closed. A delivered row is kept between SentRetention and 1.25
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
)

// historySlotWidth is how long a history slot stays current for a
// retention.
func historySlotWidth(retention time.Duration) time.Duration {
	return max(retention/historySlotsPerRetention, minHistorySlotWidth)
}

// historyRound is what one maintenance round did to delivered history.
type historyRound struct {
	// moved counts sent rows stored before migration 013 that left
	// messages (to history, or deleted past retention).
	moved int64
	// expired counts the history rows of truncated slots.
	expired int64
}

// maintainHistory moves sent rows stored before migration 013 out of the
// hot table in batches, rotates the current history slot and truncates
// every slot whose rows have all outlived SentRetention, after deleting
// their keys (so their dedup keys may be enqueued again).
func (r *Relay) maintainHistory(ctx context.Context, conn *pgxpool.Conn) (historyRound, error) {
	var round historyRound
	var err error
	retention := r.cfg.SentRetention
	// Whether it rotated matters to no one: a slot put off rotates next round.
	if _, err = r.q.HistoryRotate(ctx, conn, historySlotWidth(retention), historyLockWait); err != nil {
		return round, fmt.Errorf("rotate the history slot: %w", err)
	}
	if round.expired, err = r.expireHistory(ctx, conn, retention); err != nil {
		return round, err
	}
	// Last: after an upgrade of a large outbox this takes many batches
	// (1M rows: minutes), once, and the slots keep rotating meanwhile.
	if round.moved, err = pruneInBatches(ctx, conn, r.q.PruneSent, retention); err != nil {
		return round, fmt.Errorf("move sent rows stored before migration 013: %w", err)
	}
	return round, nil
}

// expireHistory truncates every history slot whose rows have all outlived
// retention, after deleting their keys, and returns how many rows they
// held.
func (r *Relay) expireHistory(ctx context.Context, conn *pgxpool.Conn, retention time.Duration) (int64, error) {
	var expired int64
	for {
		slot, err := r.q.HistoryExpiring(ctx, conn, retention)
		if err != nil {
			return expired, fmt.Errorf("find an expired history slot: %w", err)
		}
		if slot == nil {
			return expired, nil
		}
		rows, err := r.expireHistorySlot(ctx, conn, *slot)
		expired += rows
		if err != nil {
			return expired, err
		}
		truncated, err := r.q.HistoryTruncate(ctx, conn, *slot, historyLockWait)
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

// expireHistorySlot deletes the keys and failed attempts of an expiring
// slot's rows in batches and returns how many rows it went through.
func (r *Relay) expireHistorySlot(ctx context.Context, conn *pgxpool.Conn, slot int32) (int64, error) {
	var after, total int64
	for {
		batch, err := r.q.ExpireHistoryKeys(ctx, conn, slot, after, maintenanceDeleteBatch)
		if err != nil {
			return total, fmt.Errorf("delete the keys of history slot %d: %w", slot, err)
		}
		total += batch.Rows
		after = batch.LastID
		if batch.Rows < maintenanceDeleteBatch {
			return total, nil
		}
	}
}
