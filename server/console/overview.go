package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/server/internal/apidb"
)

// overviewRow is one sink's line of the overview, formatted for people:
// the page renders it, the live stream sends it as JSON and the page's
// script puts each cell's text in place (as text, never as HTML).
type overviewRow struct {
	Sink       string            `json:"sink"`
	Configured bool              `json:"configured"`
	Type       string            `json:"-"`
	Cells      map[string]string `json:"cells"`
	// State is running, paused, stalled or unconfigured, for styling.
	State  string `json:"state"`
	Paused bool   `json:"paused"`
	Dead   int64  `json:"-"`
	// Bad names the cells that count something failing (never a zero),
	// for styling.
	Bad map[string]bool `json:"bad"`
	// Stale marks the recorded pause or state of a sink no relay here is
	// configured with (a typo's, a removed sink's): it can be removed.
	Stale bool `json:"stale"`
}

// overviewView is the whole overview.
type overviewView struct {
	Rows []overviewRow `json:"rows"`
	// Taken says when the counts were computed, in words.
	Taken  string `json:"taken"`
	Window string `json:"window"`
}

// readOverview reads the cluster's overview and formats it.
func (c *Console) readOverview(ctx context.Context) (overviewView, error) {
	ctx, cancel := apidb.Context(ctx, c.opt.QueryTimeout)
	defer cancel()
	ov, err := c.opt.Operator.Overview(ctx, c.opt.DB, 0)
	if err != nil {
		return overviewView{}, err
	}
	view := overviewView{Window: ov.Window.String(), Taken: "never: no relay has counted the rows yet"}
	if !ov.TakenAt.IsZero() {
		view.Taken = ago(time.Since(ov.TakenAt)) + " ago"
	}
	listed := map[string]bool{}
	for _, s := range ov.Sinks {
		listed[s.Sink] = true
		view.Rows = append(view.Rows, c.overviewRow(s, ov.Window))
	}
	// Configured sinks without rows, deliveries or pauses show as idle.
	for _, name := range c.sinkNames() {
		if !listed[name] {
			view.Rows = append(view.Rows, c.overviewRow(operator.SinkOverview{Sink: name, State: operator.SinkState{Sink: name}}, ov.Window))
		}
	}
	return view, nil
}

func (c *Console) overviewRow(s operator.SinkOverview, window time.Duration) overviewRow {
	sink, configured := c.shown.Load().sinks[s.Sink]
	n, r := s.Counts, s.Rate
	row := overviewRow{Sink: s.Sink, Configured: configured, Type: sink.Type, Dead: n.Dead, Paused: s.State.Paused() || len(s.Breakers) > 0,
		Bad:   map[string]bool{string(status.Failed): n.Failed > 0, string(status.Dead): n.Dead > 0, "errors": r.Retried > 0 || r.Dead > 0},
		Stale: !configured && (s.State.Paused() || s.State.ChangedBy != "")}
	row.Cells = map[string]string{
		string(status.Pending):    count(n.Pending),
		string(status.InProgress): count(n.InProgress),
		string(status.Failed):     count(n.Failed),
		string(status.Dead):       count(n.Dead),
		"sent_hour":               count(n.SentLastHour),
		"oldest":                  "-",
		"rate":                    fmt.Sprintf("%.2f/s", r.PerSecond),
		"p50":                     latency(r.P50),
		"p99":                     latency(r.P99),
		// Attempts, not letters: a letter redriven and dead again died
		// twice, a purged one died and is no dead letter now, so this
		// need not match the dead letters counted now.
		"errors": fmt.Sprintf("%d retried, %d died", r.Retried, r.Dead),
		"limit":  sink.RateLimit,
	}
	if n.WaitingDisabled > 0 {
		// Counted in pending, but no relay delivers them until their
		// destination is enabled again: say so where they are counted.
		row.Cells[string(status.Pending)] += fmt.Sprintf(" (%s waiting on disabled destinations)", count(n.WaitingDisabled))
	}
	if n.OldestPendingAge > 0 {
		row.Cells["oldest"] = ago(n.OldestPendingAge)
	}
	if row.Cells["limit"] == "" {
		row.Cells["limit"] = "none"
	}
	row.State, row.Cells["state"] = stateText(s, configured, window)
	return row
}

// stateText says what a sink is doing, in a word for styling and in words.
func stateText(s operator.SinkOverview, configured bool, window time.Duration) (string, string) {
	st := s.State
	by := ""
	if st.ChangedBy != "" {
		by = " by " + st.ChangedBy
		if st.ChangeReason != "" {
			by += ": " + st.ChangeReason
		}
	}
	switch {
	case st.Paused() && st.ByHand && st.UntilResumed:
		return "paused", "paused until resumed" + by
	case st.Paused() && st.ByHand:
		return "paused", "paused until " + clock(*st.PausedUntil) + by
	case st.Paused():
		return "paused", "paused by the receiver's Retry-After until " + clock(*st.PausedUntil)
	case len(s.Breakers) > 0:
		return "circuit-open", breakersText(s.Breakers)
	case !configured:
		return "unconfigured", "not configured on this relay"
	case s.Stalled(window):
		return "stalled", "stalled: rows wait and nothing was attempted in the last " + window.String()
	case st.ChangedBy != "":
		return "running", "running (resumed" + by + ")"
	}
	return "running", "running"
}

// breakersText describes a sink's open circuit breakers: the first in
// full (state, since, last failure, next probe), the others counted.
func breakersText(open []operator.BreakerState) string {
	b := open[0]
	what := "circuit breaker " + string(b.State)
	if b.Key != "" {
		what += " for " + b.Key
	}
	text := fmt.Sprintf("%s since %s (%s); last failure: %s; next probe %s", what, clock(b.Since), b.Reason, b.LastFailure, clock(b.NextProbe))
	if len(open) > 1 {
		text += fmt.Sprintf("; %d more destinations open", len(open)-1)
	}
	return text
}

func count(n int64) string { return strconv.FormatInt(n, 10) }

// latency is a percentile in milliseconds, or "-" when nothing was sent.
func latency(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// ago is a duration in its two largest units: 3h12m, 4m05s, 12s.
func ago(d time.Duration) string {
	switch d = d.Round(time.Second); {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// clock is a time of day in UTC, with the date when it is not today.
func clock(t time.Time) string {
	t = t.UTC()
	if y, m, d := t.Date(); y == time.Now().UTC().Year() && m == time.Now().UTC().Month() && d == time.Now().UTC().Day() {
		return t.Format("15:04:05Z")
	}
	return t.Format("2006-01-02\u00a015:04Z") // a time reads on one line
}

func (c *Console) getOverview(w http.ResponseWriter, r *http.Request) {
	view, err := c.overview.current(r.Context())
	if err != nil {
		c.internalError(w, r, "read the overview", err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", map[string]any{"Overview": view, "Refresh": c.opt.Refresh.Milliseconds()})
}

// getOverviewEvents streams the overview as server-sent events, one
// "overview" event per refresh, until the client leaves or the console
// closes. Every viewer shares the feed's one read per refresh.
func (c *Console) getOverviewEvents(w http.ResponseWriter, r *http.Request) {
	updates, stop := c.overview.subscribe()
	defer stop()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	for {
		select {
		case <-r.Context().Done():
			return
		case msg, ok := <-updates:
			if !ok {
				return // the console is closing
			}
			// The server's write timeout is for ordinary requests; a
			// stream lives as long as its viewer, one write at a time.
			_ = rc.SetWriteDeadline(time.Now().Add(c.opt.Refresh + c.opt.QueryTimeout))
			if _, err := fmt.Fprintf(w, "event: overview\ndata: %s\n\n", msg); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

// overviewFeed reads the overview at most once per refresh, however many
// pages and streams ask, and pushes each new reading to the streams.
type overviewFeed struct {
	read    func(context.Context) (overviewView, error)
	refresh time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	last    overviewView
	fetched time.Time
	subs    map[chan []byte]struct{}
	polling bool
	closed  bool
	done    chan struct{}
}

func newOverviewFeed(read func(context.Context) (overviewView, error), refresh time.Duration, log *slog.Logger) *overviewFeed {
	return &overviewFeed{read: read, refresh: refresh, log: log, subs: map[chan []byte]struct{}{}, done: make(chan struct{})}
}

// current returns an overview no older than the refresh interval.
func (f *overviewFeed) current(ctx context.Context) (overviewView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.fetched.IsZero() && time.Since(f.fetched) < f.refresh {
		return f.last, nil
	}
	view, err := f.read(ctx)
	if err != nil {
		return view, err
	}
	f.last, f.fetched = view, time.Now()
	return view, nil
}

// invalidate makes the next read go to the database (after a change the
// viewer wants to see at once).
func (f *overviewFeed) invalidate() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = time.Time{}
}

// subscribe returns a channel of overview events (JSON) and a function
// to call when done. The first subscriber starts the polling, which stops
// when the last leaves.
func (f *overviewFeed) subscribe() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(ch)
		return ch, func() {}
	}
	f.subs[ch] = struct{}{}
	if !f.polling {
		f.polling = true
		go f.poll()
	}
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.subs[ch]; ok {
			delete(f.subs, ch)
			close(ch)
		}
	}
}

// poll publishes an overview every refresh while anyone listens.
func (f *overviewFeed) poll() {
	ticker := time.NewTicker(f.refresh)
	defer ticker.Stop()
	for {
		f.publish()
		select {
		case <-f.done:
			return
		case <-ticker.C:
		}
		f.mu.Lock()
		if len(f.subs) == 0 {
			f.polling = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
	}
}

func (f *overviewFeed) publish() {
	view, err := f.current(context.Background())
	if err != nil {
		f.log.Warn("console: could not read the overview", "error", err)
		return
	}
	msg, err := json.Marshal(view)
	if err != nil {
		f.log.Warn("console: could not encode the overview", "error", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select { // a slow viewer gets the newest reading, not a queue
		case <-ch:
		default:
		}
		ch <- msg
	}
}

// close ends every stream and the polling.
func (f *overviewFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	close(f.done)
	for ch := range f.subs {
		delete(f.subs, ch)
		close(ch)
	}
}
