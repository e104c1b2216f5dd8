package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
)

// MaintenanceConfig is what Maintenance keeps and for how long.
type MaintenanceConfig struct {
	// Interval is how often the leading relay prunes (the relay's
	// MaintenanceInterval).
	Interval time.Duration
	// SentRetention is how long delivered messages are kept: the audit
	// trail that explains them is kept as long, their digests a quarter
	// longer (as long as a history slot can keep a member).
	SentRetention time.Duration
	// ThreadRetention is how long an idle thread is kept.
	ThreadRetention time.Duration
	// WaiterPruneAfter is how long the wake-up registrations of relays
	// that stopped renewing them are kept.
	WaiterPruneAfter time.Duration
}

// Maintenance keeps the tables that grow small, on the leading relay,
// every interval: the audit trail and digests past the sent retention,
// idle threads, per-key rate limit rows whose permit is due, dropped
// events folded into their totals, the wake-up registrations of dead
// relays and old per-minute delivery counts. (Delivered rows are
// History's.)
type Maintenance struct {
	runner
	env    Env
	leader *Leader
	cfg    MaintenanceConfig
}

// NewMaintenance returns the maintenance cfg asks for, a round every
// cfg.Interval while leader leads.
func NewMaintenance(env Env, leader *Leader, cfg MaintenanceConfig) *Maintenance {
	return &Maintenance{env: env, leader: leader, cfg: cfg}
}

// Start maintains until ctx ends or Stop.
func (m *Maintenance) Start(ctx context.Context) {
	m.start(ctx, func(ctx context.Context) {
		afterElection(ctx, m.leader, m.cfg.Interval, m.round)
	})
}

// round prunes once and reports it.
func (m *Maintenance) round(ctx context.Context) {
	pruned, err := m.prune(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.env.Logger.Warn("outbox: maintenance failed", "error", err)
		}
		return
	}
	m.env.Signals.EmitMaintained(pruned)
}

// prune runs every statement of a round and returns how many audit
// entries, digests and threads it deleted.
func (m *Maintenance) prune(ctx context.Context) (int64, error) {
	conn, err := m.env.DB.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	q, cfg := m.env.Q, m.cfg
	// The audit trail is kept as long as the delivered messages it
	// explains (a redrive, a purge).
	audit, err := pruneInBatches(ctx, conn, q.PruneAudit, cfg.SentRetention)
	if err != nil {
		return 0, fmt.Errorf("delete audit entries older than %s: %w", cfg.SentRetention, err)
	}
	// A digest is kept as long as its delivered members can be (a history
	// slot lives up to 1.25 retentions), so their lookup names it.
	digestsKept := cfg.SentRetention * (historySlotsPerRetention + 1) / historySlotsPerRetention
	digests, err := pruneInBatches(ctx, conn, q.PruneDigests, digestsKept)
	if err != nil {
		return 0, fmt.Errorf("delete digests older than %s: %w", digestsKept, err)
	}
	threads, err := pruneInBatches(ctx, conn, q.PruneThreads, cfg.ThreadRetention)
	if err != nil {
		return 0, fmt.Errorf("delete threads idle for %s: %w", cfg.ThreadRetention, err)
	}
	if err := q.PruneKeyLimits(ctx, conn); err != nil {
		return 0, fmt.Errorf("delete idle per-key rate limits: %w", err)
	}
	if err := q.FoldDroppedEvents(ctx, conn); err != nil {
		return 0, fmt.Errorf("fold dropped events: %w", err)
	}
	if err := q.PruneWaiters(ctx, conn, cfg.WaiterPruneAfter); err != nil {
		return 0, fmt.Errorf("delete the wake-up registrations of dead relays: %w", err)
	}
	if err := q.PruneDeliveryMinutes(ctx, conn, deliveryMinutesRetention); err != nil {
		return 0, fmt.Errorf("delete delivery counts older than %s: %w", deliveryMinutesRetention, err)
	}
	if err := q.PruneDestinationMinutes(ctx, conn, destinationMinutesRetention); err != nil {
		return 0, fmt.Errorf("delete destinations' delivery counts older than %s: %w", destinationMinutesRetention, err)
	}
	return audit + digests + threads, nil
}

// pruneStatement runs a retention DELETE of at most limit rows older than
// olderThan and returns how many it deleted (store's PruneSent,
// PruneAudit, PruneDigests and PruneThreads).
type pruneStatement func(ctx context.Context, db store.DBTX, olderThan time.Duration, limit int64) (int64, error)

// pruneInBatches runs prune until a batch deletes fewer than deleteBatch
// rows, and returns how many it deleted.
func pruneInBatches(ctx context.Context, conn *pgxpool.Conn, prune pruneStatement, olderThan time.Duration) (int64, error) {
	var total int64
	for {
		deleted, err := prune(ctx, conn, olderThan, deleteBatch)
		if err != nil {
			return total, err
		}
		total += deleted
		if deleted < deleteBatch {
			return total, nil
		}
	}
}
