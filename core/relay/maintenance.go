package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
)

// maintenanceDeleteBatch bounds one retention DELETE, so pruning a large
// backlog of sent rows never holds locks or bloats WAL in one go.
const maintenanceDeleteBatch = 5000

// maintain prunes delivered history (history.go) on the leading relay (see lead),
// every MaintenanceInterval, starting once the first leader election is
// over: the others skip their rounds.
func (r *Relay) maintain(ctx context.Context, firstLead <-chan struct{}) {
	select {
	case <-ctx.Done():
		return
	case <-firstLead:
	}
	ticker := time.NewTicker(r.cfg.MaintenanceInterval)
	defer ticker.Stop()
	for {
		if r.leading.Load() {
			if err := r.maintainOnce(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("outbox: maintenance failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (r *Relay) maintainOnce(ctx context.Context) error {
	conn, err := r.db.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	history, err := r.maintainHistory(ctx, conn)
	if err != nil {
		return err
	}
	if history.moved > 0 || history.expired > 0 {
		r.logger.Info("outbox: pruned delivered messages", "moved", history.moved, "expired", history.expired,
			"retention", r.cfg.SentRetention)
	}
	// The audit trail is kept as long as the delivered messages it
	// explains (a redrive, a purge).
	if _, err := pruneInBatches(ctx, conn, r.q.PruneAudit, r.cfg.SentRetention); err != nil {
		return fmt.Errorf("delete audit entries older than %s: %w", r.cfg.SentRetention, err)
	}
	// A digest is kept as long as its delivered members can be (a history
	// slot lives up to 1.25 retentions), so their lookup names it.
	if _, err := pruneInBatches(ctx, conn, r.q.PruneDigests, r.cfg.SentRetention*5/4); err != nil {
		return fmt.Errorf("delete digests older than %s: %w", r.cfg.SentRetention*5/4, err)
	}
	if err := r.maintainEvents(ctx, conn); err != nil {
		return err
	}
	r.signals.EmitMaintained(history.moved + history.expired)
	return nil
}

// maintainEvents keeps the tables of events and routes (migration 003)
// small: idle threads, per-key rate limit rows whose permit is due, and
// dropped events folded into their totals.
func (r *Relay) maintainEvents(ctx context.Context, conn *pgxpool.Conn) error {
	q := r.q
	if _, err := pruneInBatches(ctx, conn, q.PruneThreads, r.cfg.ThreadRetention); err != nil {
		return fmt.Errorf("delete threads idle for %s: %w", r.cfg.ThreadRetention, err)
	}
	if err := q.PruneKeyLimits(ctx, conn); err != nil {
		return fmt.Errorf("delete idle per-key rate limits: %w", err)
	}
	if err := q.FoldDroppedEvents(ctx, conn); err != nil {
		return fmt.Errorf("fold dropped events: %w", err)
	}
	if err := q.PruneWaiters(ctx, conn, waiterPruneAfter); err != nil {
		return fmt.Errorf("delete the wake-up registrations of dead relays: %w", err)
	}
	if err := q.PruneDeliveryMinutes(ctx, conn, deliveryMinutesRetention); err != nil {
		return fmt.Errorf("delete delivery counts older than %s: %w", deliveryMinutesRetention, err)
	}
	return nil
}

// pruneStatement runs a retention DELETE of at most limit rows older than
// olderThan and returns how many it deleted (store's PruneSent,
// PruneAudit and PruneThreads).
type pruneStatement func(ctx context.Context, db store.DBTX, olderThan time.Duration, limit int64) (int64, error)

// pruneInBatches runs prune until a batch deletes fewer than
// maintenanceDeleteBatch rows, and returns how many it deleted.
func pruneInBatches(ctx context.Context, conn *pgxpool.Conn, prune pruneStatement, olderThan time.Duration) (int64, error) {
	var total int64
	for {
		deleted, err := prune(ctx, conn, olderThan, maintenanceDeleteBatch)
		if err != nil {
			return total, err
		}
		total += deleted
		if deleted < maintenanceDeleteBatch {
			return total, nil
		}
	}
}
