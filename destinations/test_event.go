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
// call sends a new event.
func (s *Store) SendTestEvent(ctx context.Context, db DB, tenant, id, sink string, now time.Time) (TestEvent, error) {
	if sink == "" {
		return TestEvent{}, inputErrorf("no sink of type destinations is configured to send a test event with")
	}
	nonce := make([]byte, 8)
	if _, err := rand.Read(nonce); err != nil {
		return TestEvent{}, fmt.Errorf("destinations: make a test event's key: %w", err)
	}
	payload, err := json.Marshal(struct {
		Type      string        `json:"type"`
		Timestamp string        `json:"timestamp"`
		Data      testEventData `json:"data"`
	}{TestEventType, now.UTC().Format(time.RFC3339Nano), testEventData{Destination: id, Note: testEventNote}})
	if err != nil {
		return TestEvent{}, fmt.Errorf("destinations: encode a test event: %w", err)
	}
	key := TestEventType + "/" + hex.EncodeToString(nonce)
	row, err := s.q.DestinationEnqueue(ctx, db, tenant, id, sink, key, payload)
	if errors.Is(err, pgx.ErrNoRows) {
		return TestEvent{}, ErrNotFound
	}
	if err != nil {
		return TestEvent{}, fmt.Errorf("destinations: send a test event to %s of tenant %s: %w", id, tenant, err)
	}
	return TestEvent{MessageID: row.ID, DedupKey: key}, nil
}
