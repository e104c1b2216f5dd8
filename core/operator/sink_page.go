package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// MinuteTally is one minute of a sink's deliveries, as every relay adds
// them up in the per-minute counts.
type MinuteTally struct {
	Minute time.Time
	// Sent, Retried and Dead count the attempts of that minute that
	// delivered, failed and will be retried, and failed for good.
	Sent, Retried, Dead int64
}

// SinkMinutes returns sink's per-minute delivery counts over the last
// span (rounded down to whole minutes, the current minute included),
// oldest first; a minute without any attempt has no tally. It reads at
// most one row a minute of span, never a message.
func (o *Operator) SinkMinutes(ctx context.Context, db store.DBTX, sink string, span time.Duration) ([]MinuteTally, error) {
	rows, err := o.q.SinkMinutes(ctx, db, sink, span.Truncate(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("outbox: read the delivery minutes of sink %q: %w", sink, err)
	}
	out := make([]MinuteTally, len(rows))
	for i, r := range rows {
		out[i] = MinuteTally{Minute: r.Minute, Sent: r.Sent, Retried: r.Retried, Dead: r.Dead}
	}
	return out, nil
}

// SinkAudit returns the audit trail's entries about sink (its pauses,
// resumes, which close its breakers, removed pauses, redrives and
// purges) recorded at or after since, newest first, at most limit (bounded
// as audit.Filter's).
func (o *Operator) SinkAudit(ctx context.Context, db store.DBTX, sink string, since time.Time, limit int) ([]audit.Entry, error) {
	limit = min(max(limit, 1), audit.MaxLimit)
	rows, err := o.q.SinkAudit(ctx, db, sink, since, int64(limit))
	if err != nil {
		return nil, fmt.Errorf("outbox: read the audit trail of sink %q: %w", sink, err)
	}
	entries := make([]audit.Entry, len(rows))
	for i, r := range rows {
		entries[i] = audit.Entry{ID: r.ID, At: r.At, Actor: r.Actor, Role: r.Role, Source: r.Source, Action: r.Action,
			Sink: r.Sink, Filter: rawOrNil(r.Filter), Count: r.Count, Detail: rawOrNil(r.Detail)}
	}
	return entries, nil
}

// rawOrNil is a stored JSON value, nil for SQL NULL (which scans empty
// and would not marshal).
func rawOrNil(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return raw
}
