package destinations

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// TestEventType is the type of the event SendTestEvent sends, so a
// receiver can tell a test from a real event.
const TestEventType = "outboxd.test"

// TestEvent is a test event enqueued for a destination: its row and the
// dedup key it was enqueued under (the delivery's webhook-id is the sink
// and this key).
type TestEvent struct {
	MessageID int64  `json:"message_id"`
	DedupKey  string `json:"dedup_key"`
}

// testEventData is a test event's data: which destination it tests.
type testEventData struct {
	Destination string `json:"destination"`
	Note        string `json:"note"`
}

// testEventNote tells whoever reads the event what it is.
const testEventNote = "a test event sent by hand; no action is needed"

// SendTestEvent enqueues an event of type TestEventType for destination
// id of tenant, through sink (a sink of type destinations), in the
// Standard Webhooks envelope {"type", "timestamp", "data"} every
// untemplated event is delivered in. It is delivered like any other row:
// signed, retried, and waiting while the destination is disabled. Each
// call sends a new event, recorded in the audit trail as actor's; a
// tenant at its TestEventsPerMinute quota is refused with a *QuotaError.
func (s *Store) SendTestEvent(ctx context.Context, db DB, actor audit.Actor, tenant, id, sink string, now time.Time) (TestEvent, error) {
	data, err := json.Marshal(testEventData{Destination: id, Note: testEventNote})
	if err != nil {
		return TestEvent{}, fmt.Errorf("destinations: encode a test event: %w", err)
	}
	return s.sendTest(ctx, db, actor, tenant, id, sink, TestEventType, data, now)
}

// SendExample sends destination id of tenant a test event of type et (an
// entry of the catalog, Catalog.Lookup) whose data is et's example, as
// SendTestEvent sends its own: the receiver gets the event its
// subscription will get, with the same quota and audit record.
func (s *Store) SendExample(ctx context.Context, db DB, actor audit.Actor, tenant, id, sink string, et EventType, now time.Time) (TestEvent, error) {
	data := et.Example
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return s.sendTest(ctx, db, actor, tenant, id, sink, et.Name, data, now)
}

// sendTest enqueues a test event of eventType with data for destination
// id of tenant through sink (see SendTestEvent).
func (s *Store) sendTest(ctx context.Context, db DB, actor audit.Actor, tenant, id, sink, eventType string, data json.RawMessage, now time.Time) (TestEvent, error) {
	if sink == "" {
		return TestEvent{}, inputErrorf("no sink of type destinations is configured to send a test event with")
	}
	if s.door.Load().network != nil {
		d, err := s.Get(ctx, db, tenant, id)
		if err != nil {
			return TestEvent{}, err
		}
		if err := s.checkURL(ctx, d.ownURL); err != nil {
			return TestEvent{}, err
		}
	}
	nonce := make([]byte, 8)
	if _, err := rand.Read(nonce); err != nil {
		return TestEvent{}, fmt.Errorf("destinations: make a test event's key: %w", err)
	}
	payload, err := json.Marshal(struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{eventType, now.UTC().Format(time.RFC3339Nano), data})
	if err != nil {
		return TestEvent{}, fmt.Errorf("destinations: encode a test event: %w", err)
	}
	key := TestEventType + "/" + hex.EncodeToString(nonce)
	var row store.DestinationEnqueueRow
	err = store.ReadCommitted(ctx, db, func(tx pgx.Tx) error {
		if err := s.checkTestEvents(ctx, tx, tenant, now); err != nil {
			return err
		}
		if row, err = s.q.DestinationEnqueue(ctx, tx, tenant, id, sink, key, payload); errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		} else if err != nil {
			return fmt.Errorf("destinations: send a test event to %s of tenant %s: %w", id, tenant, err)
		}
		return s.trail.Write(ctx, tx, actor, audit.Record{Action: audit.ActionDestinationTestEvent, Filter: target{tenant, id}, Count: 1,
			Detail: map[string]int64{"message_id": row.ID}})
	})
	if err != nil {
		return TestEvent{}, err
	}
	return TestEvent{MessageID: row.ID, DedupKey: key}, nil
}
