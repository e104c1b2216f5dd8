package outboxd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// Event is a domain event a producer publishes once; the routes applied to
// the database decide which sinks receive it and the relay renders it into
// each sink's payload (see docs/events.md and package routing).
type Event struct {
	// Type is a dotted name ("order.created") that routes match.
	Type string
	// Key is the producer's idempotency key: publishing the same (Type, Key)
	// again creates nothing.
	Key string
	// Data is any JSON object: a json.RawMessage or []byte holding one, or a
	// value encoding to one; nil means {}.
	Data any
	// OrderingKey, when set, makes the event's rows reach each sink in
	// publishing order with the other events of the key (per sink: one
	// sink's delays never hold up another's).
	OrderingKey string
	// ThreadKey, when set, makes the event part of a conversation with the
	// other events of the key: a sink that can thread (Slack) posts the
	// first as a message and later ones as replies to it. A thread's events
	// reach each sink in order. A route's template may set it instead.
	ThreadKey string
}

// Published is one row a publish created or found.
type Published struct {
	// Sink is the target's sink; one event can have several rows of one
	// sink, from different routes.
	Sink string
	ID   int64
	// Created is false when the row existed already: the same (type, key)
	// was published before.
	Created bool
	// FanOut is set for the row of a route target with a tenant (a sink
	// of type destinations, docs/destinations.md): what the fan-out to
	// that tenant's destinations made of the event, in the same
	// transaction; nil for the rows of other targets.
	FanOut *FanOut
}

// FanOut is what publishing an event made for a route target with a
// tenant: the tenant the event named and how many destination rows it
// created (0: the tenant has no destination subscribed to the event's
// type whose payload filter the event matches, and nothing was created
// for it).
type FanOut struct {
	Tenant       string
	Destinations int
}

// noMatchingDestination is a FanOut's note when it made no row.
const noMatchingDestination = "no matching destination: the tenant has no destination subscribed to this event type whose filter the event matches, so nothing was sent"

// Note says what an answer to a publish should add: that nothing was
// created because the tenant has no destination subscribed to the
// event's type; "" when the fan-out made rows. POST /v1/events and
// `outboxd publish` print it.
func (f FanOut) Note() string {
	if f.Destinations == 0 {
		return noMatchingDestination
	}
	return ""
}

// Publishing errors. Both are the producer's to fix, not the database's:
// check for them with errors.Is.
var (
	// ErrInvalidEvent is wrapped by the error of an event that cannot be
	// published as it is (bad type, key or data).
	ErrInvalidEvent = errors.New("invalid event")
	// ErrNoRoute is wrapped by the error of an event that no applied route
	// matches (unless the routes drop such events), or of any event when
	// no routes are applied.
	ErrNoRoute = errors.New("no route")
)

// Publish publishes ev in the default outbox. See [Outbox.Publish].
func Publish(ctx context.Context, db DBTX, ev Event) ([]Published, error) {
	return defaultOutbox().Publish(ctx, db, ev)
}

// Publish turns ev into one outbox row per target of the routes its type
// matches, in one statement, through db: pass the caller's pgx.Tx to make
// the rows commit or roll back with the business data. Each row is an
// ordinary message with its own attempts, backoff, rate limit and dead
// letter. It returns every target's row in route order; rows that existed
// already (the same type and key were published before) have Created
// false. An event that matches no route returns an error wrapping
// ErrNoRoute, or, when the routes say routes_unmatched: drop, no rows.
// The row of a route target with a tenant carries its FanOut: how many
// of the tenant's destinations the event reached, none saying so in its
// Note (one more statement, run only when the event reached such a
// target; should it fail, the error is returned, and through a pool the
// event is stored already: publishing it again finds its rows).
//
// Publish calls the SQL function <schema>.publish(), which producers in any
// language can call inside their own transactions: every producer gets the
// same routes.
func (o *Outbox) Publish(ctx context.Context, db DBTX, ev Event) ([]Published, error) {
	data, headers, err := o.encodeEvent(ctx, ev)
	if err != nil {
		return nil, err
	}
	rows, err := o.q.Publish(ctx, db, ev.Type, ev.Key, data, ev.OrderingKey, ev.ThreadKey, headers)
	if err != nil {
		return nil, publishError(ev, err)
	}
	published := make([]Published, len(rows))
	var fanning []*Published
	for i, r := range rows {
		published[i] = Published{Sink: r.Sink, ID: r.ID, Created: r.Created}
		if r.FansOut {
			fanning = append(fanning, &published[i])
		}
	}
	if err := o.readFanOuts(ctx, db, fanning); err != nil {
		return nil, fmt.Errorf("outbox: publish %s/%s: %w", ev.Type, ev.Key, err)
	}
	o.countPublished(ctx, published)
	return published, nil
}

// readFanOuts sets the FanOut of the rows of sinks a target with a tenant
// sends to (publish.sql's fans_out): what destination_rows() (migration
// 016) recorded on each routed row. It costs a statement only when the
// publish reached such a sink.
func (o *Outbox) readFanOuts(ctx context.Context, db DBTX, rows []*Published) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]int64, len(rows))
	for i, p := range rows {
		ids[i] = p.ID
	}
	found, err := o.q.DestinationFanOuts(ctx, db, ids)
	if err != nil {
		return fmt.Errorf("read what its fan-out to destinations made: %w", err)
	}
	byID := make(map[int64]*FanOut, len(found))
	for _, f := range found {
		byID[f.ID] = &FanOut{Tenant: f.Tenant, Destinations: f.Destinations}
	}
	for _, p := range rows {
		p.FanOut = byID[p.ID]
	}
	return nil
}

// PublishBatch publishes events in one statement, in their order, and
// returns each event's rows at its index. Nothing is written when one of
// them fails: the error is then a *BatchError naming it.
func (o *Outbox) PublishBatch(ctx context.Context, db DBTX, events []Event) ([][]Published, error) {
	if len(events) == 0 {
		return nil, nil
	}
	var (
		types, keys, orderings, threads = make([]string, len(events)), make([]string, len(events)), make([]string, len(events)), make([]string, len(events))
		data                            = make([][]byte, len(events))
		headers                         []byte
	)
	for i, ev := range events {
		var err error
		if data[i], headers, err = o.encodeEvent(ctx, ev); err != nil {
			return nil, &BatchError{Index: i, Err: fmt.Errorf("event %d: %w", i, err)}
		}
		types[i], keys[i], orderings[i], threads[i] = ev.Type, ev.Key, ev.OrderingKey, ev.ThreadKey
	}
	rows, err := o.q.PublishBatch(ctx, db, types, keys, data, orderings, threads, headers)
	if err != nil {
		return nil, batchPublishError(len(events), err)
	}
	out := make([][]Published, len(events))
	var fansOut map[int64]bool
	for _, r := range rows {
		if r.Event < 1 || r.Event > len(events) {
			return nil, batchPublishError(len(events), fmt.Errorf("event index %d out of range", r.Event))
		}
		out[r.Event-1] = append(out[r.Event-1], Published{Sink: r.Sink, ID: r.ID, Created: r.Created})
		if r.FansOut {
			if fansOut == nil {
				fansOut = map[int64]bool{}
			}
			fansOut[r.ID] = true
		}
	}
	if fansOut != nil {
		// Pointers into out, taken once every event's slice has stopped
		// growing.
		var fanning []*Published
		for i := range out {
			for j := range out[i] {
				if fansOut[out[i][j].ID] {
					fanning = append(fanning, &out[i][j])
				}
			}
		}
		if err := o.readFanOuts(ctx, db, fanning); err != nil {
			return nil, fmt.Errorf("outbox: publish batch of %d events: %w", len(events), err)
		}
	}
	for _, published := range out {
		o.countPublished(ctx, published)
	}
	return out, nil
}

// encodeEvent encodes ev's data and the caller's trace context for the
// publish statement. Everything else is checked by the SQL function, so
// that every producer meets the same rules and wording.
func (o *Outbox) encodeEvent(ctx context.Context, ev Event) (data, headers []byte, err error) {
	switch d := ev.Data.(type) {
	case nil:
		data = []byte("{}")
	case json.RawMessage:
		data = d
	case []byte:
		data = d
	default:
		if data, err = json.Marshal(d); err != nil {
			return nil, nil, fmt.Errorf("outbox: %w: data cannot be encoded as JSON: %v", ErrInvalidEvent, err)
		}
	}
	if !json.Valid(data) {
		return nil, nil, fmt.Errorf("outbox: %w: data is not valid JSON", ErrInvalidEvent)
	}
	// What jsonb cannot store fails here, as the producer's mistake, not in
	// the database as an error of the statement (SQLSTATE 22P05, 22P02,
	// 22021).
	if !utf8.Valid(data) {
		return nil, nil, fmt.Errorf("outbox: %w: data: not valid UTF-8", ErrInvalidEvent)
	}
	if problem := jsonbEscapeProblem(data); problem != "" {
		return nil, nil, fmt.Errorf("outbox: %w: data: %s", ErrInvalidEvent, problem)
	}
	if h := withTraceContext(ctx, nil); len(h) > 0 {
		if headers, err = json.Marshal(h); err != nil {
			return nil, nil, fmt.Errorf("outbox: encode trace headers: %w", err)
		}
	}
	return data, headers, nil
}

// SQLSTATEs of the publish() function's refusals.
const (
	sqlstateInvalidParameter = "22023" // a bad event
	sqlstateNoDataFound      = "P0002" // no route
)

// eventError is a refusal of publish(): its message is the function's,
// and it wraps ErrInvalidEvent or ErrNoRoute.
type eventError struct {
	kind error
	msg  string
}

func (e *eventError) Error() string { return e.msg }
func (e *eventError) Unwrap() error { return e.kind }

// classifyPublishError turns publish()'s refusals into errors wrapping
// ErrInvalidEvent or ErrNoRoute; it returns nil for any other error.
func classifyPublishError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch {
	case pgErr.Code == sqlstateInvalidParameter && strings.HasPrefix(pgErr.Message, "outbox: "):
		return &eventError{kind: ErrInvalidEvent, msg: pgErr.Message}
	case pgErr.Code == sqlstateNoDataFound && strings.HasPrefix(pgErr.Message, "outbox: "):
		msg := pgErr.Message
		if pgErr.Hint != "" {
			msg += " (" + strings.TrimSuffix(pgErr.Hint, ".") + ")"
		}
		return &eventError{kind: ErrNoRoute, msg: msg}
	}
	return nil
}

func publishError(ev Event, err error) error {
	if refused := classifyPublishError(err); refused != nil {
		return refused
	}
	return fmt.Errorf("outbox: publish %s/%s: %w", ev.Type, ev.Key, err)
}

func batchPublishError(n int, err error) error {
	if refused := classifyPublishError(err); refused != nil {
		if i, ok := refusedEvent(err, n); ok {
			return &BatchError{Index: i, Err: refused}
		}
		return refused
	}
	return fmt.Errorf("outbox: publish batch of %d events: %w", n, err)
}

// BatchError reports which element of a batch PublishBatch or EnqueueBatch
// refused. Index is its position in the slice passed in, counted from 0.
// Err is the refusal as its reporter worded it (publish_batch() counts
// events from 1), and errors.Is and errors.As see through to
// it: ErrInvalidEvent, ErrNoRoute, ErrInvalidMessage.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return e.Err.Error() }
func (e *BatchError) Unwrap() error { return e.Err }

// refusedEvent returns the index of the event of a batch of n that
// publish_batch() refused with err: the error's column field holds its
// ordinal, counted from 1 (migration 007).
func refusedEvent(err error, n int) (int, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return 0, false
	}
	ord, convErr := strconv.Atoi(pgErr.ColumnName)
	if convErr != nil || ord < 1 || ord > n {
		return 0, false
	}
	return ord - 1, true
}

// countPublished adds a publish's rows to the enqueue counter.
func (o *Outbox) countPublished(ctx context.Context, published []Published) {
	for _, p := range published {
		o.countEnqueues(ctx, p.Sink, p.Created, 1)
	}
}
