package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/internal/breakerevent"
	"github.com/outboxd/outboxd/core/internal/listener"
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
	// and shown with the sink.
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
// force, shortening it if asked, and records p.By and p.Reason. Deliveries
// already under way finish. It returns the end of the pause.
func (o *Operator) PauseSink(ctx context.Context, db core.DBTX, sink string, p Pause) (time.Time, error) {
	if p.For < 0 {
		return time.Time{}, fmt.Errorf("outbox: pause sink %q: negative duration %s", sink, p.For)
	}
	var d *time.Duration
	if p.For > 0 {
		d = &p.For
	}
	until, err := o.q.PauseSinkByHand(ctx, db, store.PauseSinkByHandParams{Sink: sink, PauseFor: d,
		UntilResumed: pauseUntilResumed, By: p.By, Reason: p.Reason, Channel: o.q.Channel, Payload: listener.PausePrefix + sink})
	if err != nil {
		return time.Time{}, fmt.Errorf("outbox: pause sink %q: %w", sink, err)
	}
	return until, nil
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
// its circuit breakers, at once on every running relay, and records by and
// reason. Each breaker it closes is published as the event
// outboxd.destination.closed through the routes, as a probe's success
// would publish it (on db: with no route for the event, nothing is
// published). It reports whether the sink was paused and which breakers
// it closed; log them with LogClosed.
func (o *Operator) ResumeSink(ctx context.Context, db core.DBTX, sink, by, reason string) (Resumed, error) {
	row, err := o.q.ResumeSink(ctx, db, sink, by, reason, o.q.Channel, listener.PausePrefix+sink)
	if err != nil {
		return Resumed{}, fmt.Errorf("outbox: resume sink %q: %w", sink, err)
	}
	res := Resumed{WasPaused: row.WasPaused}
	for i, key := range row.ClosedKeys {
		b := BreakerState{Sink: sink, Key: key, State: BreakerClosed, Since: row.ClosedSince[i], Reason: row.ClosedReasons[i]}
		res.Closed = append(res.Closed, b)
		if err := breakerevent.Publish(ctx, o.q, db, breakerevent.Closed,
			breakerevent.Data{Sink: sink, Key: key, Reason: b.Reason, Since: b.Since}); err != nil {
			return res, fmt.Errorf("outbox: resume sink %q: resumed, but %w", sink, err)
		}
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
func (o *Operator) SinkStates(ctx context.Context, db core.DBTX) (map[string]SinkState, error) {
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
func (o *Operator) CheckSinkKnown(ctx context.Context, db core.DBTX, sink string, configured bool) error {
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
// removed sink's) leaves the console and the stats. It reports whether the
// sink was paused; a sink without state is ErrUnknownSink, a configured one
// ErrConfiguredSink.
func (o *Operator) ForgetSink(ctx context.Context, db core.DBTX, sink string, configured bool) (bool, error) {
	if configured {
		return false, fmt.Errorf("outbox: forget sink %q: %w (resume it instead)", sink, ErrConfiguredSink)
	}
	was, err := o.q.ForgetSink(ctx, db, sink, o.q.Channel, listener.PausePrefix+sink)
	if err != nil {
		return false, fmt.Errorf("outbox: forget sink %q: %w", sink, err)
	}
	if len(was) == 0 {
		return false, fmt.Errorf("outbox: forget sink %q: it has no recorded state: %w", sink, ErrUnknownSink)
	}
	return was[0], nil
}
