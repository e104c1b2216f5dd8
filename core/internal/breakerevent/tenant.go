package breakerevent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// TenantNotice is the data of an operational event sent to a tenant
// about one of its own destinations (outboxd.destination.failing,
// recovered or disabled), in the tenant's words: its state
// (status.HealthFailing, HealthHealthy or HealthDisabled), since when,
// and for a disabled one why. The statement adds the destination's id
// and description; no sink, route, breaker key or internal address is
// part of it.
type TenantNotice struct {
	State  string    `json:"state"`
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
}

// NotifyTenant sends eventType about destination (a rate key of the
// destinations sink sinkName whose breaker changed) to the destinations
// of that destination's own tenant subscribed to it by a pattern, on db:
// in the transaction that records the change, so the notice exists if and
// only if the change does (destination_tenant_notice.sql). A key that is
// not a destination's (a Slack channel) sends nothing. Keyed by the
// destination, the event and the moment the breaker opened, so a change
// reported by two relays is sent once.
func NotifyTenant(ctx context.Context, q *store.Queries, db store.DBTX, eventType, sinkName, destination string, n TenantNotice) error {
	if destination == "" {
		return nil
	}
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode %s for its tenant: %w", eventType, err)
	}
	key := eventType + "/" + destination + "/" + strconv.FormatInt(n.Since.UnixNano(), 10)
	// The destination that recovered hears of it too; news that it
	// fails or is disabled would wait behind that very state.
	includeAbout := eventType == status.EventDestinationRecovered
	if _, err := q.DestinationTenantNotice(ctx, db, sinkName, destination, eventType, key, data, includeAbout); err != nil {
		return fmt.Errorf("send %s about destination %s to its tenant: %w", eventType, destination, err)
	}
	return nil
}
