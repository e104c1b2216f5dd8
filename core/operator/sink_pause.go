package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/internal/breakerevent"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// pauseUntilResumed is how far ahead paused_until is set for a pause by
// hand without an end: far enough to outlast any deployment, near enough
// that every reader of the column keeps working with finite times (and a
// time.Duration, which ends at 292 years, can hold it).
const pauseUntilResumed = 100 * 365 * 24 * time.Hour

// ErrUnknownSink is wrapped by CheckSinkKnown's error for a sink name that
// is neither configured nor known to the outbox, and by ForgetSink's for a
// sink without recorded state.
var ErrUnknownSink = errors.New("no such sink")

// ErrConfiguredSink is wrapped by ForgetSink's error for a sink of the
// caller's configuration: its state is live (resume it instead).
var ErrConfiguredSink = errors.New("the sink is configured")

// Pause is an operator's request to pause a sink.
type Pause struct {
	// For is how long the pause lasts; 0 pauses until ResumeSink.
	For time.Duration
	// By and Reason say who paused the sink and why; they are recorded
	// and shown with the sink. An empty By records the actor's name; the
	// audit trail records the actor in any case.
	By, Reason string
}

// SinkState is a sink's pause, if any, and the last pause or resume by
// hand.
type SinkState struct {
	Sink string `json:"sink"`
	// PausedUntil is set while the sink is paused, by a Retry-After or by
	// hand; every relay stops delivering to it until then.
	PausedUntil *time.Time `json:"paused_until"`
	// ByHand says the pause in force is an operator's (and not a
	// Retry-After that outlasts it); UntilResumed that it has no end.
	ByHand       bool `json:"by_hand"`
	UntilResumed bool `json:"until_resumed"`
	// ChangedBy, ChangeReason and ChangedAt describe the last pause or
	// resume by hand (empty when there was none).
	ChangedBy    string     `json:"changed_by,omitempty"`
	ChangeReason string     `json:"change_reason,omitempty"`
	ChangedAt    *time.Time `json:"changed_at,omitempty"`
}

// Paused reports whether the sink is paused.
func (s SinkState) Paused() bool { return s.PausedUntil != nil }

// PauseSink stops every relay of the cluster from delivering to sink, the
// same way a receiver's Retry-After does (running relays are told at once
// through a notification; relays that start later read the pause), until
// p.For has passed or ResumeSink is called. It replaces the pause in
// force, shortening it if asked, and records p.By (actor's name when
// empty) and p.Reason with the sink, and the pause as actor's in the audit
// trail, in one transaction. Deliveries already under way finish. It
// returns the end of the pause.
func (o *Operator) PauseSink(ctx context.Context, db audit.DB, actor audit.Actor, sink string, p Pause) (time.Time, error) {
	if p.For < 0 {
		return time.Time{}, fmt.Errorf("outbox: pause sink %q: negative duration %s", sink, p.For)
	}
	var d *time.Duration
	if p.For > 0 {
		d = &p.For
	}
	var until time.Time
	err := o.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		var err error
		until, err = o.q.PauseSinkByHand(ctx, tx, store.PauseSinkByHandParams{Sink: sink, PauseFor: d,
			UntilResumed: pauseUntilResumed, By: changedBy(p.By, actor), Reason: p.Reason, Channel: o.q.Channel, Payload: store.PausePrefix + sink})
		detail := pauseDetail{Reason: p.Reason, UntilResumed: d == nil}
		if d != nil {
			detail.For, detail.Until = p.For.String(), &until
		}
		return audit.Record{Action: audit.ActionPause, Sink: sink, Count: 1, Detail: detail}, true, err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("outbox: pause sink %q: %w", sink, err)
	}
	return until, nil
}

// pauseDetail is a pause as the audit trail records it.
type pauseDetail struct {
	For          string     `json:"for,omitempty"`
	Until        *time.Time `json:"until,omitempty"`
	UntilResumed bool       `json:"until_resumed"`
	Reason       string     `json:"reason"`
}

// resumeDetail is a resume as the audit trail records it: why, and the
// rate keys of the circuit breakers it closed.
type resumeDetail struct {
	Reason         string   `json:"reason"`
	WasPaused      bool     `json:"was_paused"`
	ClosedBreakers []string `json:"closed_breakers"`
}

// changedBy is who a pause or resume records with the sink: by, else the
// actor's name.
func changedBy(by string, actor audit.Actor) string {
	if by != "" {
		return by
	}
	return actor.Name
}

// Resumed is what a ResumeSink did.
type Resumed struct {
	// WasPaused says the sink was paused (by hand or by a Retry-After) or
	// had a circuit breaker open.
	WasPaused bool
	// Closed are the circuit breakers the resume closed (Sink, Key, Since
	// and Reason set), each published as outboxd.destination.closed.
	Closed []BreakerState
}

// ResumeSink ends sink's pause, by hand or by a Retry-After, and closes
// its circuit breakers, at once on every running relay, and records by
// (actor's name when empty) and reason with the sink. Each breaker it
// closes is published as the event outboxd.destination.closed through the
// routes, as a probe's success would publish it (with no route for the
// event, nothing is published). The resume, its events and its audit
// entry (actor's) commit together. It reports whether the sink was paused
// and which breakers it closed; log them with LogClosed.
func (o *Operator) ResumeSink(ctx context.Context, db audit.DB, actor audit.Actor, sink, by, reason string) (Resumed, error) {
	var res Resumed
	err := o.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		res = Resumed{}
		row, err := o.q.ResumeSink(ctx, tx, sink, changedBy(by, actor), reason, o.q.Channel, store.PausePrefix+sink)
		if err != nil {
			return audit.Record{}, false, err
		}
		res.WasPaused = row.WasPaused
		for i, key := range row.ClosedKeys {
			b := BreakerState{Sink: sink, Key: key, State: status.BreakerClosed, Since: row.ClosedSince[i], Reason: row.ClosedReasons[i]}
			res.Closed = append(res.Closed, b)
			if err := breakerevent.Publish(ctx, o.q, tx, status.EventDestinationClosed,
				breakerevent.Data{Sink: sink, Key: key, Reason: b.Reason, Since: b.Since}); err != nil {
				return audit.Record{}, false, err
			}
		}
		var count int64
		if row.WasPaused {
			count = 1
		}
		return audit.Record{Action: audit.ActionResume, Sink: sink, Count: count,
			Detail: resumeDetail{Reason: reason, WasPaused: row.WasPaused, ClosedBreakers: row.ClosedKeys}}, true, nil
	})
	if err != nil {
		return Resumed{}, fmt.Errorf("outbox: resume sink %q: %w", sink, err)
	}
	return res, nil
}

// LogClosed logs the one INFO line of each circuit breaker the resume
// closed, as the relay logs a breaker its probe closes.
func (r Resumed) LogClosed(ctx context.Context, log *slog.Logger, by string) {
	for _, b := range r.Closed {
		log.InfoContext(ctx, "outbox: circuit breaker closed by hand; delivery resumes",
			"sink", b.Sink, "key", b.Key, "by", by, "open_for", time.Since(b.Since).Round(time.Millisecond))
	}
}

// SinkStates lists, by sink name, the sinks paused now and those paused or
// resumed by hand at some time.
func (o *Operator) SinkStates(ctx context.Context, db store.DBTX) (map[string]SinkState, error) {
	rows, err := o.q.SinkPauses(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("outbox: read sink pauses: %w", err)
	}
	states := make(map[string]SinkState, len(rows))
	for _, r := range rows {
		states[r.Sink] = SinkState{Sink: r.Sink, PausedUntil: r.PausedUntil, ByHand: r.ByHand, UntilResumed: r.UntilResumed,
			ChangedBy: r.ChangedBy, ChangeReason: r.ChangeReason, ChangedAt: r.ChangedAt}
	}
	return states, nil
}

// CheckSinkKnown returns an error wrapping ErrUnknownSink unless sink is
// configured (the caller's configuration has it) or the outbox has rows or
// state of it. The CLI, the HTTP API and the console check before a pause
// unless forced: a typo must not pause a sink no relay delivers to, while
// the sink meant goes on delivering.
func (o *Operator) CheckSinkKnown(ctx context.Context, db store.DBTX, sink string, configured bool) error {
	if configured {
		return nil
	}
	seen, err := o.q.SinkSeen(ctx, db, sink)
	if err != nil {
		return fmt.Errorf("outbox: look up sink %q: %w", sink, err)
	}
	if !seen {
		return fmt.Errorf("outbox: sink %q is not configured and has no messages: %w (force to pause it anyway)", sink, ErrUnknownSink)
	}
	return nil
}

// ForgetSink deletes the recorded state of a sink that is not configured
// (configured false): its pause, who changed it last and its rate limit's
// clock, on every running relay at once, so a stale pause (a typo's, or a
// removed sink's) leaves the console and the stats; it is recorded as
// actor's in the audit trail in the same transaction. It reports whether
// the sink was paused; a sink without state is ErrUnknownSink, a
// configured one ErrConfiguredSink.
func (o *Operator) ForgetSink(ctx context.Context, db audit.DB, actor audit.Actor, sink string, configured bool) (bool, error) {
	if configured {
		return false, fmt.Errorf("outbox: forget sink %q: %w (resume it instead)", sink, ErrConfiguredSink)
	}
	var was []bool
	err := o.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		var err error
		was, err = o.q.ForgetSink(ctx, tx, sink, o.q.Channel, store.PausePrefix+sink)
		return audit.Record{Action: audit.ActionForget, Sink: sink, Count: 1,
			Detail: map[string]bool{"was_paused": len(was) > 0 && was[0]}}, len(was) > 0, err
	})
	if err != nil {
		return false, fmt.Errorf("outbox: forget sink %q: %w", sink, err)
	}
	if len(was) == 0 {
		return false, fmt.Errorf("outbox: forget sink %q: it has no recorded state: %w", sink, ErrUnknownSink)
	}
	return was[0], nil
}
