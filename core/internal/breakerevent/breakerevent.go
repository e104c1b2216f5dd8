// Package breakerevent publishes the events a circuit breaker's change
// sends through the outbox's own routes (outboxd.destination.opened and
// outboxd.destination.closed), for the relay, whose probes open and close
// breakers, and for the operator, whose resume closes them by hand: one
// event data shape and one rule for the unhealthy destination's own rows.
package breakerevent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/outboxd/outboxd/internal/store"
)

// Event types of a breaker's changes.
const (
	Opened = "outboxd.destination.opened"
	Closed = "outboxd.destination.closed"
)

// Data is the data of a breaker's event.
type Data struct {
	Sink   string    `json:"sink"`
	Key    string    `json:"key"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// Publish publishes eventType about breaker d through the routes, on db:
// with no route for it, or none applied, it publishes nothing. Rows it
// creates for the unhealthy sink itself are deleted: that news cannot go
// through the destination it is about. (For a destination key, the
// sink's other keys still get it; a row for the unhealthy key waits for
// it like the key's other rows.) The event's key names the breaker and
// the moment it opened, so its opening and its closing are each published
// once whoever reports them.
func Publish(ctx context.Context, q *store.Queries, db store.DBTX, eventType string, d Data) error {
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
	key := d.Sink + "/" + d.Key + "/" + strconv.FormatInt(d.Since.UnixNano(), 10)
	rows, err := q.Publish(ctx, db, eventType, key, data, "", "", nil)
	if err != nil {
		return fmt.Errorf("publish %s for sink %q: %w", eventType, d.Sink, err)
	}
	var self []int64
	for _, row := range rows {
		if row.Sink == d.Sink && d.Key == "" && row.Created {
			self = append(self, row.ID)
		}
	}
	if len(self) == 0 {
		return nil
	}
	if err := q.BreakerDropEvents(ctx, db, self, d.Sink); err != nil {
		return fmt.Errorf("drop %s rows for sink %q itself: %w", eventType, d.Sink, err)
	}
	return nil
}
