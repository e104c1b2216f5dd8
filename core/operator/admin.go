package operator

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// SinkStats counts one sink's rows by status.
type SinkStats struct {
	Pending    int64 `json:"pending"`
	InProgress int64 `json:"in_progress"`
	Failed     int64 `json:"failed"`
	Sent       int64 `json:"sent"`
	Dead       int64 `json:"dead"`
	// OldestPendingAge is how long the oldest row still waiting for delivery
	// (pending or failed) has been waiting; zero when none waits.
	OldestPendingAge time.Duration `json:"-"`
}

// Stats returns per-sink row counts by status and the age of the oldest
// waiting row, measured on the database clock.
func (o *Operator) Stats(ctx context.Context, db store.DBTX) (map[string]SinkStats, error) {
	rows, err := o.q.Stats(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("outbox: stats: %w", err)
	}
	stats := map[string]SinkStats{}
	for _, r := range rows {
		s := stats[r.Sink]
		switch status.Row(r.Status) {
		case status.Pending:
			s.Pending = r.Count
		case status.InProgress:
			s.InProgress = r.Count
		case status.Failed:
			s.Failed = r.Count
		case status.Sent:
			s.Sent = r.Count
		case status.Dead:
			s.Dead = r.Count
		}
		if age := time.Duration(r.OldestWaitingSeconds * float64(time.Second)); age > s.OldestPendingAge {
			s.OldestPendingAge = age
		}
		stats[r.Sink] = s
	}
	return stats, nil
}

// DeadLetter is a dead row with the errors of its failed attempts.
type DeadLetter struct {
	ID       int64           `json:"id"`
	Sink     string          `json:"sink"`
	DedupKey string          `json:"dedup_key"`
	Payload  json.RawMessage `json:"payload"`
	// CreatedAt is when the message was enqueued.
	CreatedAt time.Time `json:"created_at"`
	// Receipt is what the receiver returned for an earlier delivery
	// (a message delivered, then redriven and dead), or null.
	Receipt   json.RawMessage `json:"receipt"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error"`
	// UpdatedAt is when the row last changed: when it died.
	UpdatedAt time.Time `json:"updated_at"`
	// Errors lists each recorded failed attempt, oldest first.
	Errors []AttemptError `json:"errors,omitempty"`
}

// AttemptError is one failed attempt.
type AttemptError struct {
	Attempt  int       `json:"attempt"`
	FailedAt time.Time `json:"failed_at"`
	Error    string    `json:"error"`
	// Details are the attempt's start, duration and the receiver's
	// answer; nil for an attempt recorded before outboxd kept them.
	Details *AttemptDetails `json:"details,omitempty"`
}

// DeadLetterFilter selects dead letters; zero values select everything.
type DeadLetterFilter struct {
	Sink string
	// ErrorContains keeps the dead letters whose last error contains it,
	// ignoring case.
	ErrorContains string
	// After is the cursor: only dead letters with a larger id are listed.
	// Pass the last id of a page to get the next one.
	After int64
	Limit int // 0 means DefaultDeadLetterLimit
}

// DefaultDeadLetterLimit bounds one page of dead letters.
const DefaultDeadLetterLimit = 100

// DeadLetters lists dead rows, oldest first, with their payloads and
// recorded errors, one page at a time: pass the last id of a page as
// DeadLetterFilter.After for the next.
func (o *Operator) DeadLetters(ctx context.Context, db store.DBTX, f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultDeadLetterLimit
	}
	rows, err := o.q.DeadLetters(ctx, db, f.Sink, f.Limit, f.After, f.ErrorContains)
	if err != nil {
		return nil, fmt.Errorf("outbox: list dead letters: %w", err)
	}
	letters := make([]DeadLetter, len(rows))
	for i, r := range rows {
		d := DeadLetter{ID: r.ID, Sink: r.Sink, DedupKey: r.DedupKey, Payload: r.Payload, CreatedAt: r.CreatedAt,
			Receipt: r.Receipt, Attempts: r.Attempts, LastError: r.LastError, UpdatedAt: r.UpdatedAt}
		if err := json.Unmarshal(r.Errors, &d.Errors); err != nil {
			return nil, fmt.Errorf("outbox: list dead letters: %w", err)
		}
		letters[i] = d
	}
	return letters, nil
}

// RedriveFilter selects dead letters to redrive or purge: the given IDs, or
// every dead row matching Sink and ErrorContains when All is true.
type RedriveFilter struct {
	IDs  []int64
	All  bool
	Sink string
	// ErrorContains, with All, keeps the dead letters whose last error
	// contains it, ignoring case (as DeadLetterFilter.ErrorContains).
	ErrorContains string
	// Token, when set, is the ActionResult.Token of a dry run of the same
	// selection: the action is a confirmation and acts on exactly the rows
	// that dry run counted. Rows that died after the count (whatever their
	// id: rows die in attempt order, not id order) are left out; if a
	// counted row is no longer there or the selection otherwise changed,
	// nothing is done and the error wraps ErrSelectionChanged, with the
	// selection's new count and token in the result.
	Token string
	// Destination, with All, keeps the rows addressed to this destination
	// (a tenant's endpoint, docs/destinations.md: the rows whose
	// outboxd-destination header names it). Purge only; Redrive refuses
	// it.
	Destination string
	// Waiting makes Purge delete the rows of Sink (or of Destination)
	// still waiting for delivery (pending or failed) as well: the way to
	// drop the rows of a sink that no relay is configured with (a typo in
	// a producer's sink name, a removed sink), or those parked for a
	// disabled destination. It needs All and a Sink or a Destination;
	// Redrive refuses it.
	Waiting bool
	// DryRun changes nothing: the result says what would be done.
	DryRun bool
}

// ErrSelectionChanged is wrapped by the error of a confirmation
// (RedriveFilter.Token) whose selection is no longer the rows its dry run
// counted; nothing was done.
var ErrSelectionChanged = errors.New("the selection changed since it was counted")

// ErrInvalidToken is wrapped by the error of a RedriveFilter.Token that no
// dry run returned.
var ErrInvalidToken = errors.New("not the token of a dry run")

func (f RedriveFilter) validate() error {
	switch {
	case len(f.IDs) == 0 && !f.All:
		return fmt.Errorf("outbox: select dead letters by id or ask for all of them")
	case len(f.IDs) > 0 && (f.All || f.Sink != "" || f.ErrorContains != "" || f.Destination != ""):
		return fmt.Errorf("outbox: select dead letters by id or all (of a sink, of a destination, with an error), not both")
	case f.Waiting && (!f.All || (f.Sink == "" && f.Destination == "")):
		return fmt.Errorf("outbox: deleting waiting rows needs all rows of one sink or of one destination")
	case f.Token != "" && f.DryRun:
		return fmt.Errorf("outbox: a dry run takes no confirmation token")
	}
	return nil
}

// ActionResult is what Redrive or Purge did or, in a dry run, would do.
type ActionResult struct {
	// Rows counts the rows moved or deleted (in a dry run: that would be;
	// when the selection changed: that it now holds).
	Rows int64 `json:"rows"`
	// LastID is the largest id among them (0 for none).
	LastID int64 `json:"last_id"`
	// Token names the rows counted: pass it as RedriveFilter.Token to act
	// on exactly them.
	Token string `json:"token"`
	// Missing lists the ids of RedriveFilter.IDs that named no dead
	// letter: no such row, or a row that is not dead.
	Missing []int64 `json:"missing"`
	DryRun  bool    `json:"dry_run"`
}

// confirmation is what a token names: the counted rows' largest id, their
// latest death time (nil for none) and the digest of their ids and death
// times.
type confirmation struct {
	upToID    int64
	deadUntil *time.Time
	digest    string
}

// token spells c as "<up to id>.<dead until, Unix microseconds>.<digest>".
func (c confirmation) token() string {
	var micros int64
	if c.deadUntil != nil {
		micros = c.deadUntil.UnixMicro()
	}
	return fmt.Sprintf("%d.%d.%s", c.upToID, micros, c.digest)
}

// parseToken reads a token; "" is no confirmation.
func parseToken(token string) (confirmation, error) {
	var c confirmation
	if token == "" {
		return c, nil
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[2]) != md5.Size*2 || strings.Trim(parts[2], "0123456789abcdef") != "" {
		return c, fmt.Errorf("outbox: token %q: %w", token, ErrInvalidToken)
	}
	id, idErr := strconv.ParseInt(parts[0], 10, 64)
	micros, timeErr := strconv.ParseInt(parts[1], 10, 64)
	if idErr != nil || timeErr != nil || id < 0 || micros < 0 {
		return c, fmt.Errorf("outbox: token %q: %w", token, ErrInvalidToken)
	}
	c.upToID, c.digest = id, parts[2]
	if micros > 0 {
		t := time.UnixMicro(micros)
		c.deadUntil = &t
	}
	return c, nil
}

// Redrive moves the selected dead rows back to pending with their attempts
// reset, and wakes the relays, as actor's (recorded in the audit trail in
// the same transaction); a dry run only counts them and records nothing.
func (o *Operator) Redrive(ctx context.Context, db audit.DB, actor audit.Actor, f RedriveFilter) (ActionResult, error) {
	if f.Waiting {
		return ActionResult{}, fmt.Errorf("outbox: redrive moves dead letters only; waiting rows are already waiting")
	}
	if f.Destination != "" {
		return ActionResult{}, fmt.Errorf("outbox: redrive selects by id, sink and error, not by destination")
	}
	return o.act(ctx, db, actor, audit.ActionRedrive, f, func(tx pgx.Tx, f RedriveFilter, c confirmation) (store.PurgeRow, error) {
		row, err := o.q.Redrive(ctx, tx, store.RedriveParams{IDs: selectedIDs(f), All: f.All, Sink: f.Sink,
			ErrorContains: f.ErrorContains, UpToID: c.upToID, DeadUntil: c.deadUntil, Digest: c.digest, DryRun: f.DryRun})
		return store.PurgeRow(row), err
	})
}

// Purge deletes the selected dead rows (and, with Waiting, the waiting
// rows of the sink or the destination) and their recorded errors, as
// actor's (recorded in the audit trail in the same transaction, with the
// selection); a dry run only counts them and records nothing.
func (o *Operator) Purge(ctx context.Context, db audit.DB, actor audit.Actor, f RedriveFilter) (ActionResult, error) {
	return o.act(ctx, db, actor, audit.ActionPurge, f, func(tx pgx.Tx, f RedriveFilter, c confirmation) (store.PurgeRow, error) {
		return o.q.Purge(ctx, tx, store.PurgeParams{IDs: selectedIDs(f), All: f.All, Sink: f.Sink, Destination: f.Destination,
			ErrorContains: f.ErrorContains, UpToID: c.upToID, DeadUntil: c.deadUntil, Digest: c.digest, DryRun: f.DryRun, Waiting: f.Waiting})
	})
}

// auditFilter is a dead-letter selection as the audit trail records it.
type auditFilter struct {
	IDs         []int64 `json:"ids,omitempty"`
	All         bool    `json:"all,omitempty"`
	Sink        string  `json:"sink,omitempty"`
	Destination string  `json:"destination,omitempty"`
	Error       string  `json:"error,omitempty"`
	Waiting     bool    `json:"waiting,omitempty"`
}

// act validates f and runs its statement in a transaction that records
// the action unless it is a dry run. A confirmation whose selection
// changed is ErrSelectionChanged with the result of a new dry run (the
// selection's count now, and the token to confirm it with); nothing is
// done or recorded.
func (o *Operator) act(ctx context.Context, db audit.DB, actor audit.Actor, name string, f RedriveFilter,
	run func(pgx.Tx, RedriveFilter, confirmation) (store.PurgeRow, error)) (ActionResult, error) {
	if err := f.validate(); err != nil {
		return ActionResult{}, err
	}
	c, err := parseToken(f.Token)
	if err != nil {
		return ActionResult{}, err
	}
	var res ActionResult
	err = o.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		row, err := run(tx, f, c)
		if err != nil {
			return audit.Record{}, false, fmt.Errorf("outbox: %s: %w", name, err)
		}
		if row.Changed {
			plan := f
			plan.DryRun, plan.Token = true, ""
			if row, err = run(tx, plan, confirmation{}); err != nil {
				return audit.Record{}, false, fmt.Errorf("outbox: %s: count the changed selection: %w", name, err)
			}
			res = actionResult(f, row)
			return audit.Record{}, false, fmt.Errorf("outbox: %s: %w: it now holds %d row(s); nothing changed", name, ErrSelectionChanged, row.Rows)
		}
		res = actionResult(f, row)
		return audit.Record{Action: name, Sink: f.Sink, Count: res.Rows,
			Filter: auditFilter{IDs: f.IDs, All: f.All, Sink: f.Sink, Destination: f.Destination, Error: f.ErrorContains, Waiting: f.Waiting}}, !f.DryRun, nil
	})
	if err != nil && !errors.Is(err, ErrSelectionChanged) {
		return ActionResult{}, err
	}
	return res, err
}

// selectedIDs are the ids redrive.sql and purge.sql are given: never NULL,
// which = ANY(NULL) and EXCEPT NULL would not do with.
func selectedIDs(f RedriveFilter) []int64 {
	if f.IDs == nil {
		return []int64{}
	}
	return f.IDs
}

// actionResult is the result of redrive.sql's or purge.sql's row, the
// missing ids in order.
func actionResult(f RedriveFilter, row store.PurgeRow) ActionResult {
	slices.Sort(row.Missing)
	return ActionResult{Rows: row.Rows, LastID: row.LastID, Missing: row.Missing, DryRun: f.DryRun,
		Token: confirmation{upToID: row.LastID, deadUntil: row.DeadUntil, digest: row.Digest}.token()}
}

// UnconfiguredCountLimit is the most waiting rows UnconfiguredSinks counts
// of one sink: every relay looks once a minute, and counting a removed
// sink's million rows took a core for seconds each time.
const UnconfiguredCountLimit = 10_000

// WaitingSink is a sink with rows waiting for delivery.
type WaitingSink struct {
	Sink string
	// Waiting counts its pending and failed rows, up to
	// UnconfiguredCountLimit; AtLeast says it has that many or more.
	Waiting int64
	AtLeast bool
	// OldestPendingAge is how long the oldest of them has waited.
	OldestPendingAge time.Duration
}

// UnconfiguredSinks lists the sinks other than configured that have rows
// waiting for delivery, by name. A relay leaves such rows alone; they are
// delivered by a relay configured with their sink (a rolling deploy adding
// a sink), or wait until an operator configures the sink or purges them
// (RedriveFilter.Waiting). The cost follows the number of distinct sinks,
// and at most UnconfiguredCountLimit waiting rows of each unconfigured
// one, not the table's size.
func (o *Operator) UnconfiguredSinks(ctx context.Context, db store.DBTX, configured []string) ([]WaitingSink, error) {
	if configured == nil {
		configured = []string{} // NOT (sink = ANY(NULL)) would match nothing
	}
	names, err := o.q.UnconfiguredSinks(ctx, db, configured)
	if err != nil {
		return nil, fmt.Errorf("outbox: look for unconfigured sinks: %w", err)
	}
	// One statement per sink rather than a join: with the sink's name as
	// its parameter, the planner sees how few rows it has and reads them
	// through the index, where a join would plan for every row of the table.
	var found []WaitingSink
	for _, name := range names {
		w, err := o.q.WaitingRows(ctx, db, name, UnconfiguredCountLimit)
		if err != nil {
			return nil, fmt.Errorf("outbox: count the rows waiting for sink %q: %w", name, err)
		}
		if w.Waiting > 0 {
			found = append(found, WaitingSink{Sink: name, Waiting: w.Waiting, AtLeast: w.Waiting == UnconfiguredCountLimit,
				OldestPendingAge: time.Duration(w.OldestWaitingSeconds * float64(time.Second))})
		}
	}
	return found, nil
}

// DeadLetterGroup counts the dead letters of one sink that died with the
// same last error.
type DeadLetterGroup struct {
	Sink      string    `json:"sink"`
	LastError string    `json:"last_error"`
	Dead      int64     `json:"dead"`
	LastDied  time.Time `json:"last_died"`
}

// MaxDeadLetterGroups bounds DeadLetterGroups.
const MaxDeadLetterGroups = 100

// DeadLetterGroups groups the dead letters (of sink, unless "") by sink
// and last error, the largest groups first, at most MaxDeadLetterGroups.
func (o *Operator) DeadLetterGroups(ctx context.Context, db store.DBTX, sink string) ([]DeadLetterGroup, error) {
	rows, err := o.q.DeadLetterGroups(ctx, db, sink, MaxDeadLetterGroups)
	if err != nil {
		return nil, fmt.Errorf("outbox: group dead letters: %w", err)
	}
	groups := make([]DeadLetterGroup, len(rows))
	for i, r := range rows {
		groups[i] = DeadLetterGroup(r)
	}
	return groups, nil
}
