package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/connretry"
	"github.com/outboxd/outboxd/core/internal/pgerr"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/internal/store"
)

// A claim that failed on a connection PostgreSQL had ended is retried at
// once, as many times in a row as the pool holds connections; a failure
// to connect, and failures in a row past those, wait claimRetryInitial,
// doubling up to claimRetryDelay (see connretry.Pooled): a loop that
// waited after such failures found more of its pool ended when it woke,
// and under connections ended ten times a second on a loaded machine it
// failed in a row until it waited a second each time, and delivered
// little. A database that is away is tried once a second.
const (
	claimRetryInitial = 10 * time.Millisecond
	claimRetryDelay   = time.Second
)

// releaseLostClaimFor bounds how long a claim loop tries to hand back the
// rows of a claim whose answer was lost (see releaseLostClaim): a
// connection ended under the claim leaves the database there, and the
// first tries succeed.
const releaseLostClaimFor = claimRetryDelay

// claimedRow is a row this relay holds a lease on.
type claimedRow struct {
	sink.Delivery
	token      uuid.UUID
	rowMax     *int32 // the row's own max_attempts, if any
	leaseUntil time.Time
	deadline   *claimDeadline // shared by the rows of the claim
	// availableAt is when the row became ready, by the database's clock
	// (see claimBounds).
	availableAt time.Time
	prepared    bool // the Stage has run for this attempt
	deferrals   int  // how often a Retry-After put the row off (see finish)
	// rateKey is the row's rate key, for a sink limited per key
	// ("" otherwise), once named; probe marks the row its circuit
	// breaker's probe.
	rateKey string
	probe   bool
	// undecodable says why the row's columns could not be read into a
	// Delivery (headers that are not a JSON object of strings, written
	// around enqueue()'s checks): the row is dead-lettered instead of
	// delivered, and the rest of its claim goes on.
	undecodable error
	// report is what the completer reports the attempt's outcome to
	// (see finish).
	report deliveryReport
	// started is when the sink was called for this attempt (zero: it was
	// not), answer what the sink recorded of the receiver's answer
	// (sink.RecordAnswer): the attempt's details (attempt_details.go).
	started time.Time
	answer  sink.Answer
}

// claim leases up to limit ready rows of sinks (sql/claim.sql) for the loop
// registered as w, and traces the claim when it did something.
func (r *Relay) claim(ctx context.Context, w *waiter, limit int, sinks []string) ([]*claimedRow, error) {
	claimedAt := time.Now()
	r.collectLookout(ctx, w)
	after, full, look := w.bounds.after(sinks, claimedAt, r.cfg.PollInterval)
	if look {
		r.lookAside(ctx, w, sinks, after)
	}
	claimed, err := r.claimRows(ctx, store.ClaimParams{Limit: limit, Sinks: sinks, After: after, Waiter: w.id})
	if full {
		w.bounds.fullTook(claimedAt, time.Since(claimedAt))
	}
	w.bounds.observe(claimed)
	// The span is made after the fact, and only for claims that did
	// something: an idle relay polls every second and must not fill the
	// tracing backend with a trace per poll.
	if err != nil || len(claimed) > 0 {
		_, span := r.tracer.Start(ctx, "outbox claim", trace.WithTimestamp(claimedAt))
		span.SetAttributes(attrRowsClaimed.Int(len(claimed)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	if err == nil {
		w.retries = nil
	}
	if len(claimed) > 0 {
		r.signals.EmitClaimed(len(claimed))
	}
	return claimed, err
}

// claimRows runs the claim p describes (its limit, sinks, waiter and probe
// sink) under a new lease token.
func (r *Relay) claimRows(ctx context.Context, p store.ClaimParams) ([]*claimedRow, error) {
	token, claimedAt := uuid.New(), time.Now()
	deadline := &claimDeadline{}
	p.Token, p.Lease, p.AliveFor = token, r.cfg.Lease, r.aliveFor()
	p.DurableSinks = r.durableSinks(p.Sinks)
	buf, _ := r.claimBuffers.Get().(*[]store.ClaimRow)
	if buf == nil {
		buf = new([]store.ClaimRow)
	}
	defer r.claimBuffers.Put(buf)
	rows, err := r.q.ClaimInto(ctx, r.db, p, *buf)
	if err != nil {
		if pgerr.OutcomeUnknown(err) {
			r.releaseLostClaim(ctx, p)
		}
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	// The store's rows are copied into claimedRows below: its slice of
	// them goes back to the pool, cleared, so it holds on to no payload.
	defer clear(rows)
	*buf = rows[:0]
	// The slices are sized once: growing a slice of rows this large copies
	// them. The rows
	// live in one array and go on by pointer, from the claim through the
	// queues, the delivery and the terminal write: a row is hundreds of
	// bytes, and each copy of one on the way cost CPU, and one of them an
	// allocation per delivery.
	backing := make([]claimedRow, len(rows))
	claimed := make([]*claimedRow, len(rows))
	for i := range rows {
		row := &rows[i]
		// The lease as the database counts it, from the statement's start,
		// added to a time before the statement was sent (see claim.sql).
		c := claimedRow{token: token, leaseUntil: claimedAt.Add(row.LeaseFromStart), rowMax: row.MaxAttempts, deadline: deadline,
			availableAt: row.AvailableAt}
		if i == 0 || c.leaseUntil.Before(deadline.at) {
			deadline.at = c.leaseUntil
		}
		c.ID, c.Sink, c.DedupKey, c.Payload = row.ID, row.Sink, row.DedupKey, row.Payload
		c.OrderingKey, c.Route, c.ThreadKey = deref(row.OrderingKey), deref(row.Route), deref(row.ThreadKey)
		c.Attempt, c.CreatedAt, c.Uncertain, c.deferrals = row.Attempts, row.CreatedAt, row.Reclaimed, row.Deferrals
		if row.RouteVersion != nil {
			c.RouteVersion = *row.RouteVersion
		}
		if row.ThreadRoot != nil {
			c.ThreadRoot = *row.ThreadRoot
		}
		c.Headers, c.undecodable = decodeHeaders(row.Headers)
		backing[i] = c
		claimed[i] = &backing[i]
	}
	deadline.at = deadline.at.Add(-r.leaseReserve())
	deadline.open.Store(int32(len(rows)))
	return claimed, nil
}

// claimDeadline is the delivery deadline the rows of one claim share:
// deliveryShareOfLease into the earliest of their leases (which differ by
// the claim's own run time). One context with that deadline serves every
// delivery of the claim and the stage before it: a context with a timer
// of its own per delivery cost a timer, five allocations and a lock of the
// relay-wide delivery context per delivered message.
type claimDeadline struct {
	at     time.Time
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	open   atomic.Int32 // rows of the claim whose outcome is not submitted yet
}

// context returns the deadline's context, made on first use as a child of
// parent (every delivery of a relay runs under the same parent).
func (d *claimDeadline) context(parent context.Context) context.Context {
	d.once.Do(func() { d.ctx, d.cancel = context.WithDeadline(parent, d.at) })
	return d.ctx
}

// done counts one row's outcome as submitted (see submit): once all of the
// claim's are, its context and timer are released. No delivery of the
// claim runs then; a late one that overran the deadline found it done
// already.
func (d *claimDeadline) done() {
	if d.open.Add(-1) > 0 {
		return
	}
	d.once.Do(func() {}) // never made: nothing to release, and never to be made
	if d.cancel != nil {
		d.cancel()
	}
}

// releaseLostClaim hands back the rows of the claim p, which failed after
// it was sent (sql/release_lost_claim.sql): should it have committed, its
// rows would otherwise wait out their lease. Under connections ended
// several times a second that happened to a claim every few seconds (its
// durable commit waits for the WAL flush, and PostgreSQL ends a session
// only after such a commit, before the answer), and pickup p99 became the
// lease. It runs even when ctx ended (a shutdown that cut a claim short),
// retried on the claim loop's schedule for at most releaseLostClaimFor:
// the loop waits for it, and when the database is away (the claim was cut
// short by its shutdown) claiming again is what to wait for; the rows, if
// the claim committed, then come back when their lease expires.
func (r *Relay) releaseLostClaim(ctx context.Context, p store.ClaimParams) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseLostClaimFor)
	defer cancel()
	released, err := connretry.Do(ctx, claimRetryInitial, claimRetryDelay, int(r.db.Config().MaxConns), func(ctx context.Context) (int64, error) {
		return r.q.ReleaseLostClaim(ctx, r.db, store.ReleaseLostClaimParams{Token: p.Token, Sinks: p.Sinks})
	})
	switch {
	case err != nil:
		r.logger.Warn("outbox: could not hand back the rows of a claim whose answer was lost; should it have committed, they return when their lease expires",
			"lease", r.cfg.Lease, "error", pgerr.Describe(err))
	case released > 0:
		r.logger.Warn("outbox: handed back the rows of a claim whose answer was lost", "rows", released)
	}
}

// decodeHeaders reads a row's headers column. The claim returns it as raw
// jsonb so that one row whose headers do not decode fails only itself: the
// claim has committed, and failing it would hand every row of the batch
// back to be claimed again, and failed again, at each lease.
func decodeHeaders(raw []byte) (map[string]string, error) {
	if string(raw) == store.EmptyHeaders {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("undecodable row: headers %s are not a JSON object of strings: %w", safetext.Text(string(raw), maxQuotedHeaders), err)
	}
	return h, nil
}

// maxQuotedHeaders is how much of undecodable headers their row's error
// quotes.
const maxQuotedHeaders = 256

// deref returns *s, or "" for nil (a NULL column).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// claimFailed logs a failed claim of the loop registered as w and waits
// for the next retry of its schedule (see claimRetryInitial), or stops the
// relay when retrying the claim cannot help: a relay that cannot claim
// delivers nothing, and exiting (for a restart, which waits for the
// database and its migrations) is louder than a warning a minute.
func (r *Relay) claimFailed(ctx context.Context, w *waiter, err error) {
	switch {
	case ctx.Err() != nil:
	case !pgerr.IsTransient(err):
		r.fail(fmt.Errorf("claims fail with an error retrying cannot fix: %s", pgerr.Describe(err)))
	default:
		if w.retries == nil {
			w.retries = connretry.NewPooled(claimRetryInitial, claimRetryDelay, int(r.db.Config().MaxConns))
		}
		wait := w.retries.Next(err)
		r.logger.Warn("outbox: claim failed", "error", err, "retry_in", wait)
		sleep(ctx, wait)
	}
}

// idle waits for a wake-up of w, for d, or for a signal on also (nil waits
// for the first two only).
func (r *Relay) idle(ctx context.Context, w *waiter, d time.Duration, also <-chan struct{}) {
	r.signals.EmitIdle()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-w.wake:
	case <-also:
	case <-timer.C:
	}
}
