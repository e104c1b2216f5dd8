package relay

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/internal/breakerevent"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// A tenant's destination may subscribe to the operational events about
// the tenant's own endpoints (docs/destinations.md, "Operational
// events"): a destination's breaker opening is outboxd.destination.failing,
// its closing outboxd.destination.recovered, and the relay disabling it
// outboxd.destination.disabled. They go to that tenant's destinations
// only, never through the routes (which the operator's own
// outboxd.destination.opened, closed and disabled take), in the
// transaction that records the change.

// notifyTenant sends eventType about the destination key of sb, in state
// since since, to its tenant's destinations subscribed to it, in a
// savepoint of tx: a notice that cannot be made costs the notice,
// logged, never the breaker's change. A key that names no destination
// (a Slack channel, or the sink as a whole) sends nothing.
func (r *Relay) notifyTenant(ctx context.Context, tx pgx.Tx, eventType string, sb *sinkBreakers, key, state string, since time.Time) error {
	if key == "" {
		return nil
	}
	n := breakerevent.TenantNotice{State: state, Since: since.UTC()}
	if eventType == status.EventDestinationDisabled {
		n.Reason = status.AutoDisabledForTenant
	}
	return r.publishInSavepoint(ctx, tx, eventType, sb.name, key, func(db store.DBTX) error {
		return breakerevent.NotifyTenant(ctx, r.q, db, eventType, sb.name, key, n)
	})
}
