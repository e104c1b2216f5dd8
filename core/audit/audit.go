// Package audit is the outbox's audit trail: who did which operator action
// (a pause, a resume, a forgotten pause, a redrive, a purge, routes
// applied, migrations applied), on what, how many things it changed, when
// and from where. Each entry is written in the transaction of the action
// it records (see Do), so the trail holds exactly the actions that
// happened. The relays' maintenance deletes entries older than the
// delivered messages' retention.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/store"
)

// The actions an entry names.
const (
	ActionPause       = "pause"
	ActionResume      = "resume"
	ActionForget      = "forget"
	ActionRedrive     = "redrive"
	ActionPurge       = "purge"
	ActionRoutesApply = "routes_apply"
	ActionMigrate     = "migrate"
	// ActionConfigReload is serve reloading plugins.yaml (SIGHUP or
	// POST /-/reload); refused reloads change nothing and are not recorded.
	ActionConfigReload = "config_reload"
	// The changes of a tenant's destination (package destinations):
	// their filter names the tenant and the destination; a delete's count
	// is the waiting rows that went with it, a disable's and an enable's
	// the rows that moved.
	ActionDestinationCreate       = "destination_create"
	ActionDestinationUpdate       = "destination_update"
	ActionDestinationDelete       = "destination_delete"
	ActionDestinationDisable      = "destination_disable"
	ActionDestinationEnable       = "destination_enable"
	ActionDestinationRotateSecret = "destination_rotate_secret"
	// ActionDestinationTestEvent is a test event sent to a destination;
	// its count is 1. The tenant's test-event quota counts these entries.
	ActionDestinationTestEvent = "destination_test_event"
	// ActionDestinationRecover is a destination's events of a window sent
	// again (dead ones, and delivered ones when asked); its count is how
	// many, its detail the window and how many of each.
	ActionDestinationRecover = "destination_recover"
	// ActionDestinationsRekey is every secret sealed again under the
	// current key; its count is how many.
	ActionDestinationsRekey = "destinations_rekey"
	// ActionPortalLink is a link to a tenant's portal minted: its actor
	// is who minted it, its filter the tenant, its detail until when the
	// link lasts (expires_at).
	ActionPortalLink = "portal_link"
)

// Sources of actions taken by no request.
const (
	// SourceCLI is the Source of an action taken with the command line.
	SourceCLI = "cli"
	// SourceRelay is the Source of an action a relay took by itself (a
	// destination disabled after its breaker stayed open too long).
	SourceRelay = "relay"
)

// Actor is who takes an action: a token's name, a user named by an
// authenticating proxy, or $USER@host on the command line; the role they
// hold (read, produce, operate or admin); and where the request came
// from (the client's address, or SourceCLI).
type Actor struct {
	Name   string
	Role   string
	Source string
}

// DB is a handle an action can run a transaction on: a pool, a
// connection, or the caller's transaction (the action then runs in a
// savepoint of it, and is recorded only if the caller commits).
type DB interface {
	store.DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Record is what an action did, for its entry.
type Record struct {
	Action string
	// Sink is the sink it concerned, "" for none.
	Sink string
	// Filter is the selection it acted on (marshalled to JSON; nil for
	// none), Count how many things it changed.
	Filter any
	Count  int64
	// Detail holds the rest (marshalled to JSON; nil for none).
	Detail any
}

// Entry is one recorded action, as GET /v1/audit and `outboxd audit list
// -o json` show it.
type Entry struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Role   string          `json:"role"`
	Source string          `json:"source"`
	Action string          `json:"action"`
	Sink   string          `json:"sink"`
	Filter json.RawMessage `json:"filter"`
	Count  int64           `json:"count"`
	Detail json.RawMessage `json:"detail"`
}

// Trail reads and writes the audit trail of one outbox schema. It holds no
// connection and is safe for concurrent use.
type Trail struct {
	q *store.Queries
}

// New returns the Trail of q's outbox schema. Programs get theirs from
// the front door (outboxd.Outbox.Audit), which makes the one store and
// trail its engine shares.
func New(q *store.Queries) *Trail {
	return &Trail{q: q}
}

// Do runs act in a transaction of db (a savepoint when db is a
// transaction) and records what it returns as actor's in the same
// transaction. When act fails, or returns ok false (it changed nothing: a
// dry run, a confirmation whose selection changed), nothing is recorded;
// when the record cannot be written, the action rolls back too.
func (t *Trail) Do(ctx context.Context, db DB, actor Actor, act func(tx pgx.Tx) (rec Record, ok bool, err error)) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rec, ok, err := act(tx)
		if err != nil || !ok {
			return err
		}
		return t.Write(ctx, tx, actor, rec)
	})
}

// Write records rec as actor's through db: callers that hold the action's
// transaction themselves (migrate) write with it.
func (t *Trail) Write(ctx context.Context, db store.DBTX, actor Actor, rec Record) error {
	filter, err := marshalOrNull(rec.Filter)
	if err != nil {
		return fmt.Errorf("outbox: audit %s: encode the filter: %w", rec.Action, err)
	}
	detail, err := marshalOrNull(rec.Detail)
	if err != nil {
		return fmt.Errorf("outbox: audit %s: encode the detail: %w", rec.Action, err)
	}
	if err := t.q.AuditRecord(ctx, db, store.AuditRecordParams{Actor: actor.Name, Role: actor.Role, Source: actor.Source,
		Action: rec.Action, Sink: rec.Sink, Filter: filter, Count: rec.Count, Detail: detail}); err != nil {
		return fmt.Errorf("outbox: audit %s: %w", rec.Action, err)
	}
	return nil
}

func marshalOrNull(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// DefaultLimit and MaxLimit bound a listing.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Filter selects entries: those recorded at or after Since (the zero time:
// all), newest first, at most Limit (0 means DefaultLimit; above MaxLimit
// means MaxLimit).
type Filter struct {
	Since time.Time
	Limit int
}

// List returns the entries f selects, newest first.
func (t *Trail) List(ctx context.Context, db store.DBTX, f Filter) ([]Entry, error) {
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	rows, err := t.q.AuditList(ctx, db, f.Since, int64(limit))
	if err != nil {
		return nil, fmt.Errorf("outbox: list the audit trail: %w", err)
	}
	entries := make([]Entry, len(rows))
	for i, r := range rows {
		entries[i] = Entry{ID: r.ID, At: r.At, Actor: r.Actor, Role: r.Role, Source: r.Source, Action: r.Action,
			Sink: r.Sink, Filter: nullable(r.Filter), Count: r.Count, Detail: nullable(r.Detail)}
	}
	return entries, nil
}

// nullable is a stored JSON value, nil (JSON null) for SQL NULL, which
// scans as an empty value that would not marshal.
func nullable(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// ParseSince reads a listing's since: an RFC 3339 time, or a duration
// back from now (24h, 90m).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("since: want a duration back from now such as 24h, or an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", s)
	}
	return t, nil
}
