// Package completer writes delivery outcomes to the outbox in batches: the
// outcomes that accumulate while the previous write runs, and for a short
// linger after the first, go out in one statement.
package completer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/internal/connretry"
	"github.com/outboxd/outboxd/core/internal/pgerr"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// Terminal writes are retried while the database is briefly away: at once
// while the failures are on connections PostgreSQL had ended (the write
// runs on another one; as many in a row as the pool holds connections, see
// package connretry), then after retryInitial, doubling up to retryMax
// between tries. Past the outcomes' leases, the rows are left to
// lease expiry: another relay re-delivers them, which the contract allows;
// they are never marked wrong.
const (
	retryInitial = 50 * time.Millisecond
	retryMax     = 2 * time.Second
	// minWindow is how long a write is tried even when its lease has
	// already expired: a late result still counts if no other relay has
	// re-claimed the row, and the token guard makes it harmless if one has.
	minWindow = 5 * time.Second
)

// DefaultLinger is how long the completer waits after an outcome for more
// to write in the same statement. Under light load a relay would otherwise
// commit one terminal write per delivery, and those transactions compete
// for the CPU with the claims that start the next deliveries; 10 ms cut
// them from ~1 to ~0.3 per message in the latency benchmark. Deliveries do
// not wait for it (their slot is free when the sink returns), and urgent
// outcomes skip it.
const DefaultLinger = 10 * time.Millisecond

// Outcome is the result of one delivery attempt, waiting to be written.
// Its text fields must already be safe to store (core sanitises them); the
// completer only protects the rest of a batch from one it cannot store.
// A delivered ("sent") outcome has no Err, Refund or Deferred: the
// terminal write keeps only its receipt (see finish.sql).
type Outcome struct {
	ID      int64
	Token   [16]byte // the lease token the row was claimed under
	Status  string
	Delay   time.Duration // before the next attempt (failed, pending)
	Err     *string       // recorded as last_error (and a failed attempt)
	Receipt []byte        // JSON, or nil
	Refund  int           // 1 gives the attempt back (RetryAfter, released rows)
	// Deferred 1 counts a Retry-After's deferral in the row's deferrals,
	// which the relay bounds by the sink's max_deferrals.
	Deferred int
	// Attempt is the attempt's details as JSON (migration 031: start,
	// duration, the receiver's answer), or nil; written on the row and,
	// for a failed attempt, on its failed_attempts row.
	Attempt []byte

	LeaseEnd time.Time // local time after which another relay may own the row
	// Urgent outcomes are written without lingering: a successor waits
	// for them (the row's ordering key's next row is only claimable once
	// this one is finished).
	Urgent bool
	// Done is told once the write finished (nil: nobody is).
	Done Reporter
}

// Reporter is told whether an outcome was written. It is an interface, not
// a func, so that the relay's per-delivery report, a pointer, is passed
// without allocating a closure per delivery.
type Reporter interface {
	// Written reports whether the row changed (false: a zombie's late
	// completion, or not written).
	Written(written bool)
}

// ReportFunc is a func as a Reporter.
type ReportFunc func(written bool)

// Written calls f.
func (f ReportFunc) Written(written bool) { f(written) }

// Finisher runs the finish statement (internal/store's finish.sql), which
// takes the outcomes as arrays and returns those it wrote, by row and
// lease; *store.Queries is one.
type Finisher interface {
	Finish(ctx context.Context, db store.DBTX, arg store.FinishParams) ([]store.FinishRow, error)
}

// lease names one outcome of a batch: its row and the lease token it was
// delivered under. Two outcomes of one row may share a batch (a late one
// under an expired lease and the current one), and only one of them is
// written.
type lease struct {
	id    int64
	token [16]byte
}

// leaseOf is o's lease.
func leaseOf(o Outcome) lease { return lease{o.ID, o.Token} }

// written is the set of a batch's outcomes that were written.
type written map[lease]bool

// Completer batches terminal writes in one finish statement each.
type Completer struct {
	pool         *pgxpool.Pool
	finisher     Finisher
	deleteOnSent bool
	logger       *slog.Logger
	maxBatch     int
	// Linger is DefaultLinger; tests change it before Run.
	Linger time.Duration
	params finishParams // Run's, see finishParams

	in   chan Outcome
	quit chan struct{} // closed by Stop: write what is queued and return
}

// New returns a completer writing batches of up to maxBatch outcomes with
// finisher through pool.
func New(pool *pgxpool.Pool, finisher Finisher, deleteOnSent bool, logger *slog.Logger, maxBatch int) *Completer {
	return &Completer{pool: pool, finisher: finisher, deleteOnSent: deleteOnSent, logger: logger, maxBatch: maxBatch,
		Linger: DefaultLinger, in: make(chan Outcome, maxBatch), quit: make(chan struct{})}
}

// Submit queues an outcome for writing. After Stop it drops it instead: a
// delivery abandoned at shutdown leaves its row to lease expiry, and
// another relay delivers it again.
func (c *Completer) Submit(o Outcome) {
	select {
	case c.in <- o:
	case <-c.quit:
	}
}

// WriteNow writes outcomes in one statement, on the caller's goroutine,
// with the retries of Run's batches: the members of a digest are finished
// together, never split over two of Run's batches. Its arrays are its own:
// Run's are reused by Run alone, and digests write while Run does.
func (c *Completer) WriteNow(outcomes []Outcome) { c.write(outcomes, &finishParams{}) }

// Stop makes Run write what is queued and return.
func (c *Completer) Stop() { close(c.quit) }

// Run writes outcomes until Stop, then writes what is still queued. It uses
// a context of its own: outcomes of deliveries that finished during
// shutdown must still be written.
func (c *Completer) Run() {
	batch := make([]Outcome, 0, c.maxBatch)
	for {
		select {
		case first := <-c.in:
			batch = append(batch[:0], first)
		case <-c.quit:
			for batch = c.fill(batch[:0]); len(batch) > 0; batch = c.fill(batch[:0]) {
				c.write(batch, &c.params)
			}
			return
		}
		c.write(c.fillLingering(batch, batch[0].Urgent), &c.params)
	}
}

// fillLingering fills batch for up to c.Linger after its first outcome,
// until it is full or until an urgent outcome arrives.
func (c *Completer) fillLingering(batch []Outcome, urgent bool) []Outcome {
	if urgent {
		return c.fill(batch)
	}
	timer := time.NewTimer(c.Linger)
	defer timer.Stop()
	for len(batch) < c.maxBatch {
		// Under load outcomes are queued already: take them without the
		// three-way select, which locks every channel it waits on, per
		// outcome.
		n := len(batch)
		batch = c.fill(batch)
		if len(batch) == c.maxBatch || anyUrgent(batch[n:]) {
			return batch
		}
		select {
		case o := <-c.in:
			batch = append(batch, o)
			if o.Urgent {
				return c.fill(batch)
			}
		case <-timer.C:
			return c.fill(batch)
		case <-c.quit:
			return c.fill(batch)
		}
	}
	return batch
}

// anyUrgent reports whether an outcome of batch is urgent.
func anyUrgent(batch []Outcome) bool {
	for i := range batch {
		if batch[i].Urgent {
			return true
		}
	}
	return false
}

// fill adds whatever is queued, without waiting, up to a full batch.
func (c *Completer) fill(batch []Outcome) []Outcome {
	for len(batch) < c.maxBatch {
		select {
		case o := <-c.in:
			batch = append(batch, o)
		default:
			return batch
		}
	}
	return batch
}

// write writes batch in one statement, retrying what a retry can fix. When
// PostgreSQL refuses the statement for the data of some row, retrying
// would fail the same way until every lease ran out (and the rows were
// delivered again, then dead-lettered though their receivers accepted
// them): the batch is written row by row instead, so only the refused row
// is affected. p holds the statement's arrays (see finishParams).
func (c *Completer) write(batch []Outcome, p *finishParams) {
	ctx, cancel := context.WithDeadline(context.Background(), writeDeadline(batch))
	defer cancel()
	done, err := c.writeRetrying(ctx, batch, p)
	if err != nil && !pgerr.IsTransient(err) {
		c.logger.Error("outbox: PostgreSQL refused a batch of terminal writes; writing its rows one by one",
			"rows", len(batch), "error", pgerr.Describe(err))
		done, err = c.writeEach(ctx, batch, p), nil
	}
	if err != nil {
		c.logger.Error("outbox: terminal writes failed; the rows will be delivered again after their lease expires",
			"rows", len(batch), "error", pgerr.Describe(err))
	}
	for _, o := range batch {
		ok := done[leaseOf(o)]
		if !ok && err == nil {
			c.logger.Warn("outbox: late completion ignored: the lease expired and another relay owns the row (zombie)",
				"id", o.ID, "status", o.Status)
		}
		if o.Done != nil {
			o.Done.Written(ok)
		}
	}
}

// writeDeadline is how long a batch's write may be retried: until the
// last of its leases ends, and at least minWindow.
func writeDeadline(batch []Outcome) time.Time {
	deadline := time.Now().Add(minWindow)
	for _, o := range batch {
		if o.LeaseEnd.After(deadline) {
			deadline = o.LeaseEnd
		}
	}
	return deadline
}

// writeRetrying runs the statement for batch, retrying transient errors
// with backoff until ctx ends; it returns the outcomes written.
func (c *Completer) writeRetrying(ctx context.Context, batch []Outcome, p *finishParams) (written, error) {
	return connretry.Do(ctx, retryInitial, retryMax, int(c.pool.Config().MaxConns), func(ctx context.Context) (written, error) {
		return c.writeOnce(ctx, batch, p)
	})
}

// writeEach writes every outcome of batch on its own. A row PostgreSQL
// still refuses is written once more as refused(o): without the text it
// could not store, with an error that says so.
func (c *Completer) writeEach(ctx context.Context, batch []Outcome, p *finishParams) written {
	done := make(written, len(batch))
	for _, o := range batch {
		one, err := c.writeRetrying(ctx, []Outcome{o}, p)
		if err != nil && !pgerr.IsTransient(err) {
			c.logger.Error("outbox: PostgreSQL refused a row's terminal write; recording it without the refused text",
				"id", o.ID, "status", o.Status, "error", pgerr.Describe(err))
			one, err = c.writeRetrying(ctx, []Outcome{refused(o, err)}, p)
		}
		if err != nil {
			c.logger.Error("outbox: terminal write failed; the row will be delivered again after its lease expires",
				"id", o.ID, "error", pgerr.Describe(err))
			continue
		}
		// Written again as refused(o), the outcome keeps its lease.
		done[leaseOf(o)] = one[leaseOf(o)]
	}
	return done
}

// refused is o without the error text and receipt PostgreSQL would not
// store, and with an error of its own in their place (a delivered row
// keeps its status and loses only its receipt).
func refused(o Outcome, cause error) Outcome {
	o.Receipt, o.Attempt = nil, nil
	if o.Err != nil || o.Status != string(status.Sent) {
		msg := fmt.Sprintf("outboxd could not store this attempt's error or receipt (%s); see the relay's log", pgerr.SQLState(cause))
		o.Err = &msg
	}
	return o
}

func (c *Completer) writeOnce(ctx context.Context, batch []Outcome, p *finishParams) (written, error) {
	params := p.fill(batch)
	params.DeleteSent = c.deleteOnSent
	rows, err := c.finisher.Finish(ctx, c.pool, params)
	if err != nil {
		return nil, err
	}
	done := make(written, len(rows))
	for _, r := range rows {
		done[lease{r.ID, r.Token.Bytes}] = true
	}
	return done, nil
}

// finishParams are the arrays of a finish statement. Run's are kept from
// one write to the next (arrays for a batch of 1,000 outcomes are ~90 KB a
// statement): only Run's goroutine uses them, one statement at a time. A
// WriteNow, on a goroutine of its own, fills arrays of its own.
type finishParams store.FinishParams

// fill sets p's arrays to batch's outcomes and returns them: every
// outcome's id and token, the others' status, delay, error, refund and
// deferral first, then the delivered ones', which have only their id and
// token (see finish.sql).
func (p *finishParams) fill(batch []Outcome) store.FinishParams {
	n, others := len(batch), 0
	for i := range batch {
		if batch[i].Status != string(status.Sent) {
			others++
		}
	}
	// [16]byte takes pgx's binary uuid codec; uuid.UUID would go through
	// driver.Valuer and text, per element.
	p.IDs, p.Tokens = resize(p.IDs, n), resize(p.Tokens, n)
	p.Statuses, p.Delays, p.Errors = resize(p.Statuses, others), resize(p.Delays, others), resize(p.Errors, others)
	p.Refunds, p.Deferred = resize(p.Refunds, others), resize(p.Deferred, others)
	other, sent := 0, others
	for _, o := range batch {
		if o.Status == string(status.Sent) {
			p.IDs[sent], p.Tokens[sent] = o.ID, o.Token
			sent++
			continue
		}
		p.IDs[other], p.Tokens[other], p.Statuses[other] = o.ID, o.Token, o.Status
		p.Delays[other], p.Errors[other], p.Refunds[other] = o.Delay.Seconds(), o.Err, int32(o.Refund)
		p.Deferred[other] = int32(o.Deferred)
		other++
	}
	p.Receipts = byLease(p.Receipts, batch, receiptOf)
	p.Details = byLease(p.Details, batch, attemptOf)
	return store.FinishParams(*p)
}

// receiptOf and attemptOf are the JSON values byLease collects.
func receiptOf(o *Outcome) []byte { return o.Receipt }
func attemptOf(o *Outcome) []byte { return o.Attempt }

// byLease is a JSON object finish.sql finds each row's receipt (or
// attempt details) in: the value of batch's outcomes keyed by "id/token",
// the row and the lease it was delivered under (two outcomes of one row,
// a late one and the current one, keep theirs apart), written over buf's
// array; nil when no outcome has one. One object the row looks itself up
// in, by a binary search of its keys, keeps the terminal write free of a
// join whose plan would follow the statistics (see finish.sql).
func byLease(buf []byte, batch []Outcome, valueOf func(*Outcome) []byte) []byte {
	buf = buf[:0]
	for i := range batch {
		o := &batch[i]
		value := valueOf(o)
		if value == nil {
			continue
		}
		if len(buf) == 0 {
			buf = append(buf, '{')
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, '"')
		buf = strconv.AppendInt(buf, o.ID, 10)
		buf = append(buf, '/')
		buf = append(buf, uuid.UUID(o.Token).String()...)
		buf = append(buf, '"', ':')
		buf = append(buf, value...)
	}
	if len(buf) == 0 {
		return nil
	}
	return append(buf, '}')
}

// resize returns s with length n, reusing its array when it is large
// enough, cleared: no outcome's error or receipt outlives its write in it.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:cap(s)]
	clear(s)
	return s[:n]
}
