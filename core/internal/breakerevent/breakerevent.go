// Package breakerevent publishes the events a circuit breaker's change
// sends through the outbox's own routes (outboxd.destination.opened and
// outboxd.destination.closed), for the relay, whose probes open and close
// breakers, and for the operator, whose resume closes them by hand: one
// event data shape and one rule for the unhealthy receiver's own rows (a
// receiver is a sink, or one rate key of a sink limited per key);
// and outboxd.destination.disabled, a tenant's destination the relay
// disabled because its breaker stayed open too long.
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

// Data is the data of a breaker's event.
type Data struct {
	Sink   string    `json:"sink"`
	Key    string    `json:"key"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// DisabledData is the data of outboxd.destination.disabled: the sink, the
// tenant and its destination, why it was disabled, and since when and
// with what failure its breaker had been open.
type DisabledData struct {
	Sink        string    `json:"sink"`
	Tenant      string    `json:"tenant"`
	Destination string    `json:"destination"`
	Reason      string    `json:"reason"`
	LastFailure string    `json:"last_failure"`
	Since       time.Time `json:"since"`
}

// PublishDisabled publishes outboxd.destination.disabled about d through
// the routes, on db, as Publish does: keyed by the breaker and the moment
// it opened, so it is published once.
func PublishDisabled(ctx context.Context, q *store.Queries, db store.DBTX, d DisabledData) error {
	return publish(ctx, q, db, status.EventDestinationDisabled, d.Sink, d.Destination, d.Since, d)
}

// Publish publishes eventType about breaker d through the routes, on db:
// with no route for it, or none applied, it publishes nothing. Rows it
// creates for the unhealthy sink itself are deleted: that news cannot go
// through the receiver it is about. (For a rate key's breaker, the sink's
// other keys still get it; a row for the unhealthy key waits for
// it like the key's other rows.) The event's key names the breaker and
// the moment it opened, so its opening and its closing are each published
// once whoever reports them.
func Publish(ctx context.Context, q *store.Queries, db store.DBTX, eventType string, d Data) error {
	return publish(ctx, q, db, eventType, d.Sink, d.Key, d.Since, d)
}

// publish publishes eventType with data about the breaker of (sinkName,
// key), open since since (see Publish).
func publish(ctx context.Context, q *store.Queries, db store.DBTX, eventType, sinkName, key string, since time.Time, d any) error {
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode %s: %w", eventType, err)
	}
	routed, err := q.EventRouted(ctx, db, eventType)
	if err != nil {
		return fmt.Errorf("look up the routes of %s: %w", eventType, err)
	}
	if !routed {
		return nil
	}
	eventKey := sinkName + "/" + key + "/" + strconv.FormatInt(since.UnixNano(), 10)
	rows, err := q.Publish(ctx, db, eventType, eventKey, data, "", "", nil)
	if err != nil {
		return fmt.Errorf("publish %s for sink %q: %w", eventType, sinkName, err)
	}
	var self []int64
	for _, row := range rows {
		if row.Sink == sinkName && key == "" && row.Created {
			self = append(self, row.ID)
		}
	}
	if len(self) == 0 {
		return nil
	}
	if err := q.BreakerDropEvents(ctx, db, self, sinkName); err != nil {
		return fmt.Errorf("drop %s rows for sink %q itself: %w", eventType, sinkName, err)
	}
	return nil
}
