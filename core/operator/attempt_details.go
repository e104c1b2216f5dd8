package operator

import (
	"encoding/json"
	"fmt"

	"github.com/outboxd/outboxd/internal/store"
)

// AttemptDetails is one delivery attempt's details: when it started, how
// long it took, and what the receiver answered (HTTP status, the first
// 4 KiB of its answer with the configuration's secrets scrubbed, the
// address the request went to). A sink that speaks HTTP reports the
// answer (sink.RecordAnswer); for other sinks only the failed attempts
// have details, their start and duration.
type AttemptDetails = store.AttemptDetails

// decodeAttempt reads stored attempt details (a JSON object, migration
// 031); nil for none.
func decodeAttempt(raw []byte) (*AttemptDetails, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var a AttemptDetails
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("outbox: read an attempt's details: %w", err)
	}
	return &a, nil
}
