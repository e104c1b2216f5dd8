package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/access"
)

// A sink's page shows its deliveries minute by minute over
// sinkMinutesSpan (a row a minute: the span bounds the page and its
// query), and the audit trail's entries about it over sinkHistorySpan,
// at most sinkHistoryLimit of them.
const (
	sinkMinutesSpan  = time.Hour
	sinkHistorySpan  = 7 * 24 * time.Hour
	sinkHistoryLimit = 50
)

// backToSink is the value of a pause or resume form's "back" field that
// returns to the sink's page rather than to the overview.
const backToSink = "sink"

// sinkPage is what a sink's page shows.
type sinkPage struct {
	Sink, Type string
	Configured bool
	// Row is the sink's line of the overview, formatted the same way.
	Row      overviewRow
	Overview operator.SinkOverview
	// LastError is the newest failure known without reading the messages:
	// the breakers' last failures and the newest dead letter's error;
	// LastErrorFrom says which it is.
	LastError, LastErrorFrom string
	LastErrorAt              time.Time
	Minutes                  []minuteRow
	// MaxSent is the busiest minute's sent (at least 1), the scale of
	// the minutes' bars.
	MaxSent int64
	Groups  []operator.DeadLetterGroup
	History []audit.Entry
}

// sinkForms is what the "sink-forms" template needs: the sink, the
// visitor's CSRF token, whether the form asks who (no sign-in) and where
// it returns (backToSink, or "" for the overview).
type sinkForms struct {
	Sink, CSRF string
	Anonymous  bool
	Back       string
}

func newSinkForms(sink, csrf, who, back string) sinkForms {
	return sinkForms{Sink: sink, CSRF: csrf, Anonymous: who == access.Anonymous, Back: back}
}

// getSink shows one sink: its state and why, last error, backlog, its
// deliveries minute by minute, its dead letters grouped by error, its
// pause and breaker history, and (operate role) its actions. It reads the
// overview's small tables, an hour of per-minute tallies, the dead
// letters' index and a week of the audit trail: nothing that grows with
// the outbox.
func (c *Console) getSink(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := c.context(r)
	defer cancel()
	ov, err := c.opt.Operator.Overview(ctx, c.opt.DB, 0)
	if err != nil {
		c.internalError(w, r, "read the sink's state", err)
		return
	}
	sink, configured := c.shown.Load().sinks[name]
	p := sinkPage{Sink: name, Type: sink.Type, Configured: configured, Overview: operator.SinkOverview{Sink: name, State: operator.SinkState{Sink: name}}}
	known := configured
	for _, s := range ov.Sinks {
		if s.Sink == name {
			p.Overview, known = s, true
		}
	}
	if !known {
		c.fail(w, r, http.StatusNotFound, "There is no sink "+name+": it is not configured here and has no rows, deliveries or pause.")
		return
	}
	p.Row = c.overviewRow(p.Overview, ov.Window)
	tallies, err := c.opt.Operator.SinkMinutes(ctx, c.opt.DB, name, sinkMinutesSpan)
	if err != nil {
		c.internalError(w, r, "read the sink's deliveries", err)
		return
	}
	p.Minutes, p.MaxSent = timeLine(tallies, time.Now(), sinkMinutesSpan)
	if p.Groups, err = c.opt.Operator.DeadLetterGroups(ctx, c.opt.DB, name); err != nil {
		c.internalError(w, r, "group the sink's dead letters", err)
		return
	}
	if p.History, err = c.opt.Operator.SinkAudit(ctx, c.opt.DB, name, time.Now().Add(-sinkHistorySpan), sinkHistoryLimit); err != nil {
		c.internalError(w, r, "read the sink's history", err)
		return
	}
	p.lastError()
	taken := "never: no relay has counted the rows yet"
	if !ov.TakenAt.IsZero() {
		taken = ago(time.Since(ov.TakenAt)) + " ago"
	}
	c.render(w, r, http.StatusOK, "sink", map[string]any{"S": p, "Taken": taken, "Window": ov.Window.String(),
		"Span": spanText(sinkMinutesSpan), "HistorySpan": spanText(sinkHistorySpan)})
}

// lastError picks the newest of the breakers' last failures and the dead
// letters' errors.
func (p *sinkPage) lastError() {
	for _, b := range p.Overview.Breakers {
		if b.LastFailureAt.After(p.LastErrorAt) {
			p.LastError, p.LastErrorAt, p.LastErrorFrom = b.LastFailure, b.LastFailureAt, "the circuit breaker's last failure"
		}
	}
	for _, g := range p.Groups {
		if g.LastDied.After(p.LastErrorAt) {
			p.LastError, p.LastErrorAt, p.LastErrorFrom = g.LastError, g.LastDied, "the newest dead letter's"
		}
	}
}

// minuteRow is a line of a sink's deliveries: one minute, or a run of
// quiet minutes (nothing attempted) from Minute to Until.
type minuteRow struct {
	operator.MinuteTally
	Until time.Time
}

// Quiet reports whether the row is a run of minutes without any attempt.
func (m minuteRow) Quiet() bool { return !m.Until.IsZero() }

// timeLine lays the tallies of the span up to now out newest first, one
// row a minute that attempted something and one row for each run of
// quiet minutes between them, so an hour reads at a glance; it returns
// the busiest minute's sent (at least 1), the scale of the bars.
func timeLine(tallies []operator.MinuteTally, now time.Time, span time.Duration) ([]minuteRow, int64) {
	byMinute := make(map[time.Time]operator.MinuteTally, len(tallies))
	maxSent := int64(1)
	for _, t := range tallies {
		byMinute[t.Minute.UTC()] = t
		maxSent = max(maxSent, t.Sent)
	}
	last := now.UTC().Truncate(time.Minute)
	first := last.Add(time.Minute - span.Truncate(time.Minute))
	var rows []minuteRow
	for m := last; !m.Before(first); m = m.Add(-time.Minute) {
		t, ok := byMinute[m]
		switch {
		case ok:
			rows = append(rows, minuteRow{MinuteTally: t})
		case len(rows) > 0 && rows[len(rows)-1].Quiet():
			rows[len(rows)-1].Minute = m // the quiet run reaches back a minute
		default:
			rows = append(rows, minuteRow{MinuteTally: operator.MinuteTally{Minute: m}, Until: m})
		}
	}
	return rows, maxSent
}

// spanText is a span in words: "7 days", "1 h".
func spanText(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return d.String()
}
