package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/internal/breakerevent"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// A sink that delivers to the outbox's destinations (one whose
// SinkConfig.AutoDisableAfter is set: a destinations sink) has a breaker
// per destination. One that has stayed open longer than
// AutoDisableAfter disables its
// destination: a customer's endpoint dead for days stops being probed,
// its rows wait (parked, none dead-lettered) until an operator enables
// it, and the event outboxd.destination.disabled lets the application
// tell its customer. Every relay checks the open breakers it reads
// (the breaker watch, once per poll interval: in memory, no statement while
// none is that old); the statement disables only while the breaker row
// exists and deletes it, so however many relays try, one disables, once,
// and publishes the event and the audit entry in the same transaction.

// disableLongOpen disables the destinations whose breakers, as last
// loaded, have been open longer than their sink allows.
func (r *Relay) disableLongOpen(ctx context.Context) {
	for _, sb := range r.breakers {
		if sb.autoDisableAfter <= 0 {
			continue
		}
		due := map[string]openBreaker{}
		sb.mu.Lock()
		for key, ob := range sb.open {
			if key != "" && time.Since(ob.since) > sb.autoDisableAfter {
				due[key] = ob
			}
		}
		sb.mu.Unlock()
		for key, ob := range due {
			r.disableDestination(ctx, sb, key, ob)
		}
	}
}

// disableDestination disables destination key of sb, its breaker open
// since ob.since, unless another relay did (or its breaker closed)
// meanwhile; if this relay did, it publishes outboxd.destination.disabled
// and records the action in the audit trail in the same transaction, and
// logs a WARN.
func (r *Relay) disableDestination(ctx context.Context, sb *sinkBreakers, key string, ob openBreaker) {
	reason := fmt.Sprintf("disabled by outboxd: its circuit breaker stayed open longer than auto_disable_after (%s), since %s",
		sb.autoDisableAfter, ob.since.UTC().Format(time.RFC3339))
	var row store.DestinationAutoDisableRow
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		row, err = r.q.DestinationAutoDisable(ctx, tx, sb.name, key, sb.autoDisableAfter, reason, r.q.Channel, store.PausePrefix+sb.name)
		if err != nil || !row.Disabled {
			return err
		}
		actor := audit.Actor{Name: "outboxd relay " + r.id, Source: audit.SourceRelay}
		if err := r.ops.Audit().Write(ctx, tx, actor, audit.Record{Action: audit.ActionDestinationDisable, Sink: sb.name,
			Filter: map[string]string{"tenant": *row.Tenant, "destination": key}, Count: row.Rows,
			Detail: map[string]any{"reason": reason, "auto": true}}); err != nil {
			return err
		}
		err = r.publishInSavepoint(ctx, tx, status.EventDestinationDisabled, sb.name, key, func(db store.DBTX) error {
			return breakerevent.PublishDisabled(ctx, r.q, db, breakerevent.DisabledData{Sink: sb.name, Tenant: *row.Tenant,
				Destination: key, Reason: reason, LastFailure: *row.LastFailure, Since: *row.OpenedAt})
		})
		if err != nil {
			return err
		}
		// The tenant hears of it too, if its destinations subscribed.
		return r.notifyTenant(ctx, tx, status.EventDestinationDisabled, sb, key, status.HealthDisabled, time.Now())
	})
	if err != nil {
		r.logger.Warn("outbox: could not disable a destination whose circuit breaker stayed open too long", "sink", sb.name, "destination", key, "error", err)
		return
	}
	// Its breaker ended, whoever disabled it.
	sb.mu.Lock()
	delete(sb.open, key)
	delete(sb.windows, key)
	sb.mu.Unlock()
	if !row.Disabled {
		return
	}
	r.logger.Warn("outbox: destination disabled: its circuit breaker stayed open longer than auto_disable_after; its rows wait until it is enabled",
		"sink", sb.name, "tenant", *row.Tenant, "destination", key, "open_since", *row.OpenedAt, "auto_disable_after", sb.autoDisableAfter,
		"rows_waiting", row.Rows)
	r.signals.EmitBreaker(sb.name, key, false)
}
