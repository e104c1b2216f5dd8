package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// ErrMessageNotFound is returned by the lookups of a single message when no
// row matches.
var ErrMessageNotFound = errors.New("outbox: no such message")

// StoredMessage is one row of the outbox as an operator sees it. Its text
// fields (payload, headers, errors, receipt) came from producers and
// receivers: show them escaped.
type StoredMessage struct {
	ID          int64             `json:"id"`
	Sink        string            `json:"sink"`
	DedupKey    string            `json:"dedup_key"`
	Payload     json.RawMessage   `json:"payload"`
	Headers     map[string]string `json:"headers"`
	OrderingKey string            `json:"ordering_key,omitempty"`
	Status      status.Row        `json:"status"`
	// Attempts counts the deliveries started (a claim counts one).
	Attempts int `json:"attempts"`
	// MaxAttempts is the message's own limit; nil means the sink's.
	MaxAttempts *int       `json:"max_attempts"`
	AvailableAt time.Time  `json:"available_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	SentAt      *time.Time `json:"sent_at"`
	// LeaseExpiresAt is set while a relay holds the row (in_progress).
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	// Receipt is what the receiver returned for the delivery (a Slack
	// channel and ts, an SMTP message id), or null.
	Receipt json.RawMessage `json:"receipt"`
	// FailedAttempts lists every recorded failed attempt, oldest first.
	FailedAttempts []AttemptError `json:"failed_attempts"`
	// LastAttempt is the details of the row's last attempt (a delivered
	// row's delivery among them), nil when none were recorded.
	LastAttempt *AttemptDetails `json:"last_attempt,omitempty"`
	// Digest is the digest the row last went out in (docs/digests.md),
	// nil when it was in none.
	Digest *MessageDigest `json:"digest,omitempty"`
	// Fallback, on a row handed over to its target's fallback or on the
	// row that stood in for it (routing's fallback), says which row
	// delivers the message and why; nil on every other row.
	Fallback *MessageFallback `json:"fallback,omitempty"`
}

// MessageFallback is a fallback as a lookup of either of its rows shows it.
// A row handed over leaves the queue as a delivered one does (status
// sent): To and ID name the fallback sink and the row that delivers it
// there. The row that stood in has From and Of: the target's sink and the
// row it stands in for.
type MessageFallback struct {
	To     string `json:"to,omitempty"`
	ID     int64  `json:"id,omitempty"`
	From   string `json:"from,omitempty"`
	Of     int64  `json:"of,omitempty"`
	Reason string `json:"reason"`
}

// MessageDigest is a digest as a lookup of one of its members shows it.
type MessageDigest struct {
	ID int64 `json:"id"`
	// DeliveryID is what receivers de-duplicate the digest on
	// ("<sink>/digest-<id>").
	DeliveryID string `json:"delivery_id"`
	// Key is the digest key its members share.
	Key     string     `json:"key"`
	Created time.Time  `json:"created"`
	SentAt  *time.Time `json:"sent_at"`
	// Siblings are the digest's other members' ids, in enqueue order.
	Siblings []int64 `json:"siblings"`
}

// TraceID is the trace the message belongs to, from the W3C traceparent
// header stored with it when it was enqueued inside a span; "" when it has
// none.
func (m StoredMessage) TraceID() string {
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m.Headers)))
	if !sc.TraceID().IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Message returns the message with id, with its failed attempts, or
// ErrMessageNotFound.
func (o *Operator) Message(ctx context.Context, db store.DBTX, id int64) (StoredMessage, error) {
	return o.lookupMessage(ctx, db, &id, "", "")
}

// MessageByKey returns the message stored under (sink, dedupKey), with its
// failed attempts, or ErrMessageNotFound.
func (o *Operator) MessageByKey(ctx context.Context, db store.DBTX, sink, dedupKey string) (StoredMessage, error) {
	return o.lookupMessage(ctx, db, nil, sink, dedupKey)
}

func (o *Operator) lookupMessage(ctx context.Context, db store.DBTX, id *int64, sink, dedupKey string) (StoredMessage, error) {
	r, err := o.q.Message(ctx, db, id, sink, dedupKey)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return StoredMessage{}, ErrMessageNotFound
	case err != nil:
		return StoredMessage{}, fmt.Errorf("outbox: look up message: %w", err)
	}
	m := StoredMessage{ID: r.ID, Sink: r.Sink, DedupKey: r.DedupKey, Payload: r.Payload, Headers: r.Headers,
		OrderingKey: r.OrderingKey, Status: status.Row(r.Status), Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		AvailableAt: r.AvailableAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, SentAt: r.SentAt,
		LeaseExpiresAt: r.LeaseExpiresAt, LastError: r.LastError, Receipt: r.Receipt}
	if err := json.Unmarshal(r.FailedAttempts, &m.FailedAttempts); err != nil {
		return StoredMessage{}, fmt.Errorf("outbox: look up message: %w", err)
	}
	if m.LastAttempt, err = decodeAttempt(r.LastAttempt); err != nil {
		return StoredMessage{}, err
	}
	if r.Fallback != nil {
		m.Fallback = &MessageFallback{}
		if err := json.Unmarshal(r.Fallback, m.Fallback); err != nil {
			return StoredMessage{}, fmt.Errorf("outbox: look up message %d's fallback: %w", m.ID, err)
		}
	}
	d, err := o.q.DigestOf(ctx, db, m.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return StoredMessage{}, fmt.Errorf("outbox: look up message %d's digest: %w", m.ID, err)
	default:
		m.Digest = &MessageDigest{ID: d.DigestID, DeliveryID: d.DeliveryID, Key: d.Key, Created: d.Created, SentAt: d.SentAt,
			Siblings: d.Siblings}
	}
	return m, nil
}

// MessageSummary is one line of a message search.
type MessageSummary struct {
	ID        int64      `json:"id"`
	Sink      string     `json:"sink"`
	DedupKey  string     `json:"dedup_key"`
	Status    status.Row `json:"status"`
	Attempts  int        `json:"attempts"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	SentAt    *time.Time `json:"sent_at"`
	LastError string     `json:"last_error,omitempty"`
}

// MessageFilter selects messages for [Operator.Messages]; zero values select
// everything.
type MessageFilter struct {
	Sink     string
	Status   status.Row
	DedupKey string
	// CreatedFrom and CreatedBefore bound the creation time: from is
	// included, before is not.
	CreatedFrom, CreatedBefore time.Time
	// Before is the cursor: only messages with a smaller id are listed.
	// Pass MessagePage.Next to get the next page.
	Before int64
	Limit  int // 0 means DefaultMessageLimit, at most MaxMessageLimit
}

// Message search page sizes.
const (
	DefaultMessageLimit = 50
	MaxMessageLimit     = 500
)

// MessagePage is one page of a search, newest first.
type MessagePage struct {
	Messages []MessageSummary `json:"messages"`
	// Next is the cursor of the next page (MessageFilter.Before), 0 when
	// this page is the last.
	Next int64 `json:"next_before,omitempty"`
}

// Messages searches the outbox, newest first, one page at a time (keyset
// paging on the id, so a page costs the same however deep it is). A sink
// with a dedup key is one probe of the unique index; a search by status
// dead walks the dead-letter index; the other searches walk the primary key
// from the cursor until the page is full, so a filter that matches
// nothing recent reads far.
func (o *Operator) Messages(ctx context.Context, db store.DBTX, f MessageFilter) (MessagePage, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultMessageLimit
	}
	f.Limit = min(f.Limit, MaxMessageLimit)
	var before *int64
	if f.Before > 0 {
		before = &f.Before
	}
	// One row more than asked says whether there is a next page.
	rows, err := o.q.MessagesSearch(ctx, db, store.MessagesSearchParams{Sink: f.Sink, Status: string(f.Status),
		DedupKey: f.DedupKey, CreatedFrom: optionalTime(f.CreatedFrom), CreatedBefore: optionalTime(f.CreatedBefore),
		Before: before, Limit: f.Limit + 1})
	if err != nil {
		return MessagePage{}, fmt.Errorf("outbox: search messages: %w", err)
	}
	found := make([]MessageSummary, len(rows))
	for i, r := range rows {
		found[i] = MessageSummary{ID: r.ID, Sink: r.Sink, DedupKey: r.DedupKey, Status: status.Row(r.Status),
			Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, SentAt: r.SentAt, LastError: r.LastError}
	}
	page := MessagePage{Messages: found}
	if len(found) > f.Limit {
		page.Messages = found[:f.Limit]
		page.Next = page.Messages[f.Limit-1].ID
	}
	if page.Messages == nil {
		page.Messages = []MessageSummary{}
	}
	return page, nil
}

// optionalTime is t, or NULL for the zero time.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
