package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnqueueResult says what happened to one enqueued message.
type EnqueueResult struct {
	ID int64
	// Created is false when a row with the same (sink, dedup key) already
	// existed; that is not an error, and ID is the existing row's.
	Created bool
}

// Enqueue stores msg in the default outbox. See [Outbox.Enqueue].
func Enqueue(ctx context.Context, db DBTX, msg Message) (EnqueueResult, error) {
	return Default.Enqueue(ctx, db, msg)
}

// EnqueueBatch stores msgs in the default outbox. See [Outbox.EnqueueBatch].
func EnqueueBatch(ctx context.Context, db DBTX, msgs []Message) ([]EnqueueResult, error) {
	return Default.EnqueueBatch(ctx, db, msgs)
}

// Enqueue validates msg and inserts it, unless its (sink, dedup key) is
// already stored. Pass the caller's pgx.Tx to make the message part of that
// transaction. Relays are woken with pg_notify in the same transaction, so
// only committed messages wake anyone.
func (o *Outbox) Enqueue(ctx context.Context, db DBTX, msg Message) (EnqueueResult, error) {
	v, err := o.validate(ctx, msg)
	if err != nil {
		return EnqueueResult{}, err
	}
	var res EnqueueResult
	err = db.QueryRow(ctx, o.sql.enqueue, v.sink, v.dedupKey, v.payload, v.headers,
		v.orderingKey, v.maxAttempts, v.availableAt, o.channel).Scan(&res.ID)
	switch {
	case err == nil:
		res.Created = true
		o.countEnqueue(ctx, v.sink, true)
		return res, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return res, fmt.Errorf("outbox: enqueue %s/%s: %w", v.sink, v.dedupKey, err)
	}
	// A duplicate. This lookup is a statement of its own so that, under READ
	// COMMITTED, it sees a conflicting row committed by a concurrent enqueue
	// after the insert's snapshot was taken.
	if err := db.QueryRow(ctx, o.sql.lookupID, v.sink, v.dedupKey).Scan(&res.ID); err != nil {
		return res, fmt.Errorf("outbox: look up duplicate %s/%s: %w", v.sink, v.dedupKey, err)
	}
	o.countEnqueue(ctx, v.sink, false)
	return res, nil
}

// EnqueueBatch validates and inserts many messages in one statement (a
// multi-row INSERT ... ON CONFLICT DO NOTHING) and reports, per message and
// in the same order, the row id and whether it was created. Nothing is
// written when any message is invalid. A (sink, dedup key) repeated within
// the batch is created once; its later occurrences report duplicates.
func (o *Outbox) EnqueueBatch(ctx context.Context, db DBTX, msgs []Message) ([]EnqueueResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	cols := batchColumns{
		sinks:       make([]string, len(msgs)),
		keys:        make([]string, len(msgs)),
		payloads:    make([]string, len(msgs)),
		headers:     make([]string, len(msgs)),
		orderings:   make([]*string, len(msgs)),
		maxAttempts: make([]*int32, len(msgs)),
		available:   make([]*time.Time, len(msgs)),
	}
	for i, m := range msgs {
		v, err := o.validate(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		cols.sinks[i], cols.keys[i] = v.sink, v.dedupKey
		cols.payloads[i], cols.headers[i] = string(v.payload), string(v.headers)
		cols.orderings[i], cols.maxAttempts[i], cols.available[i] = v.orderingKey, v.maxAttempts, v.availableAt
	}
	rows, err := db.Query(ctx, o.sql.enqueueBatch, cols.sinks, cols.keys, cols.payloads,
		cols.headers, cols.orderings, cols.maxAttempts, cols.available, o.channel)
	if err != nil {
		return nil, fmt.Errorf("outbox: enqueue batch of %d: %w", len(msgs), err)
	}
	// Map each created row back to the first message with its key; every
	// other message is a duplicate, of a row in the table or earlier in
	// this batch.
	type key struct{ sink, dedup string }
	index := make(map[key]int, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		index[key{cols.sinks[i], cols.keys[i]}] = i
	}
	ids := make(map[key]int64, len(msgs))
	created := make(map[key]bool, len(msgs))
	if err := collectIDs(rows, func(id int64, sink, dedup string) {
		ids[key{sink, dedup}], created[key{sink, dedup}] = id, true
	}); err != nil {
		return nil, fmt.Errorf("outbox: enqueue batch of %d: %w", len(msgs), err)
	}
	if len(ids) < len(index) {
		// Some already existed: one more statement finds them. It runs
		// apart from the insert so that, under READ COMMITTED, it also sees
		// rows a concurrent enqueue committed after the insert began.
		var sinks, keys []string
		for k := range index {
			if _, ok := ids[k]; !ok {
				sinks, keys = append(sinks, k.sink), append(keys, k.dedup)
			}
		}
		lookup, err := db.Query(ctx, o.sql.lookupIDs, sinks, keys)
		if err != nil {
			return nil, fmt.Errorf("outbox: look up %d duplicates: %w", len(sinks), err)
		}
		if err := collectIDs(lookup, func(id int64, sink, dedup string) { ids[key{sink, dedup}] = id }); err != nil {
			return nil, fmt.Errorf("outbox: look up %d duplicates: %w", len(sinks), err)
		}
	}
	results := make([]EnqueueResult, len(msgs))
	for i := range msgs {
		k := key{cols.sinks[i], cols.keys[i]}
		results[i] = EnqueueResult{ID: ids[k], Created: created[k] && index[k] == i}
	}
	for i, r := range results {
		o.countEnqueue(ctx, cols.sinks[i], r.Created)
	}
	return results, nil
}

type batchColumns struct {
	sinks, keys, payloads, headers []string
	orderings                      []*string
	maxAttempts                    []*int32
	available                      []*time.Time
}

// collectIDs reads (id, sink, dedup_key) rows.
func collectIDs(rows pgx.Rows, add func(id int64, sink, dedup string)) error {
	var (
		id          int64
		sink, dedup string
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &sink, &dedup}, func() error {
		add(id, sink, dedup)
		return nil
	})
	return err
}
