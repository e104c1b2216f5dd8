package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// enqueuer is one way of writing messages in scenario 3: a system's, or a
// raw statement without framework (a reference).
type enqueuer struct {
	name  string
	s     store
	sys   string // the result column; empty for a reference
	ref   string // reference name for the batch figure
	batch func(ctx context.Context, tx pgx.Tx, n int) error
}

func (b *bench) enqueuers() []enqueuer {
	var out []enqueuer
	for _, sys := range b.systems {
		s := b.store(sys)
		out = append(out, enqueuer{name: sys.name, s: s, sys: sys.name, batch: s.enqueueBatch})
	}
	o := b.store(sysOutboxd)
	out = append(out,
		enqueuer{name: "raw-insert", s: o, ref: refRawInsert, batch: rawInsert},
		enqueuer{name: "raw-copy", s: o, ref: refRawCopy, batch: rawCopy})
	return out
}

// runEnqueue is scenario 3: single-message transactions on 1 and 8
// connections, and transactions of 1,000 messages, into empty tables. The
// batch figures are measured in a pass of their own, right after one
// another, so the raw references and the systems meet the server in the
// same state (not one of them after 19,000 single-message commits).
func (b *bench) runEnqueue(ctx context.Context) error {
	all := b.enqueuers()
	for run := range b.sz.runs {
		for _, e := range rotated(all, run) {
			if e.sys == "" {
				continue
			}
			b.logf("  run %d %s, single-message transactions", run+1, e.name)
			if err := b.enqueueSingles(ctx, e); err != nil {
				return fmt.Errorf("%s run %d: %w", e.name, run+1, err)
			}
		}
		if _, err := b.admin.Exec(ctx, "CHECKPOINT"); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		for _, e := range rotated(all, run) {
			b.logf("  run %d %s, batches", run+1, e.name)
			if err := b.enqueueBatches(ctx, e); err != nil {
				return fmt.Errorf("%s run %d: %w", e.name, run+1, err)
			}
		}
	}
	return nil
}

func (b *bench) enqueueSingles(ctx context.Context, e enqueuer) error {
	for _, c := range []struct {
		m     metric
		conns int
		n     int
	}{{mEnq1, 1, b.sz.enqueueSingle1}, {mEnq8, enqueueConns, b.sz.enqueueSingle8}} {
		rate, err := timeEnqueue(ctx, e.s, c.conns, c.n, 1, func(ctx context.Context, tx pgx.Tx, _ int) error {
			_, err := e.s.enqueueOne(ctx, tx)
			return err
		})
		if err != nil {
			return err
		}
		b.res.add(c.m, e.sys, rate)
	}
	return nil
}

func (b *bench) enqueueBatches(ctx context.Context, e enqueuer) error {
	rate, err := timeEnqueue(ctx, e.s, 1, b.sz.enqueueBatches*enqueueBatchSize, enqueueBatchSize, e.batch)
	if err != nil {
		return err
	}
	if e.sys != "" {
		b.res.add(mEnqBatch, e.sys, rate)
	}
	if e.ref != "" {
		b.res.refs[e.ref] = append(b.res.refs[e.ref], rate)
	}
	b.logf("    batch %.0f msg/s", rate)
	return nil
}

// timeEnqueue empties the table, then writes n messages in transactions of
// per messages spread over conns connections and returns messages/s.
func timeEnqueue(ctx context.Context, s store, conns, n, per int, write func(context.Context, pgx.Tx, int) error) (float64, error) {
	if err := s.reset(ctx); err != nil {
		return 0, err
	}
	txs := n / per
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start := time.Now()
	for c := range conns {
		wg.Go(func() {
			for i := c; i < txs; i += conns {
				if err := inTx(ctx, s, func(tx pgx.Tx) error { return write(ctx, tx, per) }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return perSecond(txs*per, elapsed.Nanoseconds()), nil
}

// rawColumns are what the raw references write: the columns a message
// needs, the rest taking their defaults.
var rawColumns = []string{"sink", "dedup_key", "payload"}

// rawInsertSQL is one multi-row INSERT of enqueueBatchSize rows.
var rawInsertSQL = func() string {
	var sb strings.Builder
	sb.WriteString("INSERT INTO outbox.messages (sink, dedup_key, payload) VALUES ")
	for i := range enqueueBatchSize {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "($%d, $%d, $%d)", 3*i+1, 3*i+2, 3*i+3)
	}
	return sb.String()
}()

func rawRows(n int) [][]any {
	rows := make([][]any, n)
	for i := range rows {
		k := seq.Add(1)
		rows[i] = []any{noopSink, fmt.Sprintf("k%d", k), fmt.Sprintf(`{"n":%d}`, k)}
	}
	return rows
}

func rawInsert(ctx context.Context, tx pgx.Tx, n int) error {
	args := make([]any, 0, 3*n)
	for _, r := range rawRows(n) {
		args = append(args, r...)
	}
	_, err := tx.Exec(ctx, rawInsertSQL, args...)
	return err
}

func rawCopy(ctx context.Context, tx pgx.Tx, n int) error {
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"outbox", "messages"}, rawColumns, pgx.CopyFromRows(rawRows(n)))
	return err
}
