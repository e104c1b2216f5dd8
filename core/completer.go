package core

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"
)

// Terminal writes are retried when the database is briefly away. Past
// completerRetryMax the rows are left to lease expiry: another relay
// re-delivers them, which the contract allows; they are never marked wrong.
const (
	completerRetryInitial = 50 * time.Millisecond
	completerRetryMax     = 2 * time.Second
	// completerMinWindow is how long a write is tried even when its lease
	// has already expired: a late result still counts if no other relay has
	// re-claimed the row, and the token guard makes it harmless if one has.
	completerMinWindow = 5 * time.Second
)

// completerLinger is how long the completer waits after an outcome for more
// to write in the same statement. Under light load a relay would otherwise
// commit one terminal write per delivery, and those transactions compete
// for the CPU with the claims that start the next deliveries; 10 ms cut
// them from ~1 to ~0.3 per message in the latency benchmark. Deliveries do
// not wait for it (their slot is free when the sink returns), and outcomes
// that a successor waits on skip it (see outcome.urgent).
const completerLinger = 10 * time.Millisecond

// outcome is the result of one delivery attempt, waiting to be written.
type outcome struct {
	id      int64
	token   uuid.UUID
	status  Status
	delay   time.Duration // before the next attempt (failed, pending)
	err     *string       // recorded as last_error (and a failed attempt)
	receipt []byte
	refund  int // 1 gives the attempt back (RetryAfter, released rows)

	leaseEnd time.Time // local time after which another relay may own the row
	// urgent outcomes are written without lingering: the row has an
	// ordering key, and its key's next row is only claimable once this
	// one is finished.
	urgent bool
	done   func(written bool)
}

// completer batches terminal writes: the outcomes that accumulate while the
// previous write runs, and for up to completerLinger after the first one, go
// out in the next single UPDATE ... FROM unnest(...). Under load the batches
// fill up by themselves.
type completer struct {
	pool     *pgxpool.Pool
	sql      queries
	logger   *slog.Logger
	maxBatch int
	in       chan outcome
	// quit stops the completer once it has written what is in in.
	quit chan struct{}
	// deleteOnSent deletes delivered rows instead of marking them sent.
	deleteOnSent bool
	linger       time.Duration // completerLinger; tests change it
}

func newCompleter(pool *pgxpool.Pool, q queries, logger *slog.Logger, maxBatch int) *completer {
	return &completer{pool: pool, sql: q, logger: logger, maxBatch: maxBatch,
		in: make(chan outcome, maxBatch), quit: make(chan struct{}), linger: completerLinger}
}

// submit queues an outcome for writing. After stop it drops it instead: a
// delivery abandoned at shutdown leaves its row to lease expiry, and
// another relay delivers it again.
func (c *completer) submit(o outcome) {
	select {
	case c.in <- o:
	case <-c.quit:
	}
}

// stop makes run write what is queued and return.
func (c *completer) stop() { close(c.quit) }

// run writes outcomes until stop, then writes what is still queued. It uses
// its own context: outcomes of deliveries that finished during shutdown
// must still be written.
func (c *completer) run() {
	batch := make([]outcome, 0, c.maxBatch)
	for {
		select {
		case first := <-c.in:
			batch = append(batch[:0], first)
		case <-c.quit:
			for batch = c.fill(batch[:0]); len(batch) > 0; batch = c.fill(batch[:0]) {
				c.write(batch)
			}
			return
		}
		c.write(c.fillLingering(batch, batch[0].urgent))
	}
}

// fillLingering fills batch for up to c.linger after its first outcome,
// until it is full or until an urgent outcome arrives.
func (c *completer) fillLingering(batch []outcome, urgent bool) []outcome {
	if urgent {
		return c.fill(batch)
	}
	timer := time.NewTimer(c.linger)
	defer timer.Stop()
	for len(batch) < c.maxBatch {
		select {
		case o := <-c.in:
			batch = append(batch, o)
			if o.urgent {
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

// fill adds whatever is queued, without waiting, up to a full batch.
func (c *completer) fill(batch []outcome) []outcome {
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

func (c *completer) write(batch []outcome) {
	n := len(batch)
	var (
		ids = make([]int64, n)
		// [16]byte takes pgx's binary uuid codec; uuid.UUID would go
		// through driver.Valuer and text, per element.
		tokens   = make([][16]byte, n)
		statuses = make([]string, n)
		delays   = make([]float64, n)
		errs     = make([]*string, n)
		receipts = make([][]byte, n)
		refunds  = make([]int32, n)
		deadline = time.Now().Add(completerMinWindow)
	)
	for i, o := range batch {
		ids[i], tokens[i], statuses[i] = o.id, o.token, string(o.status)
		delays[i], errs[i], receipts[i], refunds[i] = o.delay.Seconds(), o.err, o.receipt, int32(o.refund)
		if o.leaseEnd.After(deadline) {
			deadline = o.leaseEnd
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	written := make(map[int64]bool, n)
	backoff := retry.WithCappedDuration(completerRetryMax, retry.NewExponential(completerRetryInitial))
	err := retry.Do(ctx, backoff, func(ctx context.Context) error {
		rows, err := c.pool.Query(ctx, c.sql.finish, ids, tokens, statuses, delays, errs, receipts, refunds, c.deleteOnSent)
		if err != nil {
			return retry.RetryableError(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return retry.RetryableError(err)
			}
			written[id] = true
		}
		if err := rows.Err(); err != nil {
			clear(written)
			return retry.RetryableError(err)
		}
		return nil
	})
	if err != nil {
		c.logger.Error("outbox: terminal writes failed; the rows will be delivered again after their lease expires",
			"rows", n, "error", fmt.Sprint(err))
	}
	for _, o := range batch {
		ok := written[o.id]
		if !ok && err == nil {
			c.logger.Warn("outbox: late completion ignored: the lease expired and another relay owns the row (zombie)",
				"id", o.id, "status", o.status)
		}
		if o.done != nil {
			o.done(ok)
		}
	}
}
