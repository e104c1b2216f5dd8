package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/routing"
)

// The events scenario publishes events through routes into an outbox
// schema of its own in outboxd's database.
const (
	eventsSchema = "bench_events"
	// eventsBatchSize is the number of events of one PublishBatch (and
	// of the matching EnqueueBatch: as many rows as the events make).
	eventsBatchSize = 100
	eventsRatio     = "%d target(s): publish ÷ enqueue of the same rows, one event per transaction %.2f×, batches of %d events %.2f×"
)

// How the scenario writes: publishing events, or enqueueing by hand the
// rows the same events make, one event per transaction or in batches.
const (
	modePublishOne   = "Publish, 1 event per transaction"
	modeEnqueueOne   = "Enqueue of the same rows, 1 event per transaction"
	modePublishBatch = "PublishBatch, batches of 100 events"
	modeEnqueueBatch = "EnqueueBatch of the same rows, batches of 100 events"
)

var eventModes = []string{modePublishOne, modeEnqueueOne, modePublishBatch, modeEnqueueBatch}

// runEvents is scenario 9: events per second published with routes of 1
// and of 3 targets against plain enqueues of the rows those events make,
// on one connection, the modes alternating from run to run.
func (b *bench) runEvents(ctx context.Context) error {
	pool := b.store(sysOutboxd).pool()
	ob, err := outboxd.New(pool, outboxd.Options{Schema: eventsSchema})
	if err != nil {
		return err
	}
	if _, err := ob.Migrator().Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate %s: %w", eventsSchema, err)
	}
	defer func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+eventsSchema+" CASCADE") }()
	for _, targets := range []int{1, 3} {
		sinks, err := applyEventRoutes(ctx, pool, ob, targets)
		if err != nil {
			return err
		}
		for run := range b.sz.runs {
			for _, mode := range rotated(eventModes, run) {
				b.logf("  run %d, %d target(s): %s", run+1, targets, mode)
				rate, err := b.measureEvents(ctx, pool, ob, sinks, mode)
				if err != nil {
					return fmt.Errorf("%d target(s), %s: %w", targets, mode, err)
				}
				b.res.refs[eventsRef(targets, mode)] = append(b.res.refs[eventsRef(targets, mode)], rate)
				b.logf("    %.0f events/s", rate)
			}
		}
		med := func(mode string) float64 { return median(b.res.refs[eventsRef(targets, mode)]) }
		b.res.note(eventsRatio, targets, med(modePublishOne)/med(modeEnqueueOne), eventsBatchSize, med(modePublishBatch)/med(modeEnqueueBatch))
	}
	return nil
}

func eventsRef(targets int, mode string) string {
	return fmt.Sprintf("9 events, %d target(s), %s (events/s)", targets, mode)
}

// applyEventRoutes makes bench.* events go to targets sinks and returns
// their names, in the order publish() creates their rows.
func applyEventRoutes(ctx context.Context, pool *pgxpool.Pool, ob *outboxd.Outbox, targets int) ([]string, error) {
	var sinks []string
	configs := map[string]sink.Sink{}
	var to []any
	for i := range targets {
		name := fmt.Sprintf("target-%d", i+1)
		sinks = append(sinks, name)
		configs[name] = sink.Func(func(context.Context, *sink.Delivery) error { return nil })
		to = append(to, name)
	}
	cfg, ps := routing.Parse(map[string]any{"bench": map[string]any{"events": []any{"bench.*"}, "to": to}}, "")
	table, more := routing.Compile(cfg, configs)
	if ps = append(ps, more...); len(ps) > 0 {
		return nil, fmt.Errorf("routes: %v", ps)
	}
	if _, err := ob.Routes().Apply(ctx, pool, table, audit.Actor{Name: "bench", Role: "admin", Source: "bench"}); err != nil {
		return nil, err
	}
	return sinks, nil
}

// measureEvents empties the outbox and writes events (b.sz.eventsSingle
// one per transaction, or b.sz.eventsBatches batches) in mode; it returns
// events per second.
func (b *bench) measureEvents(ctx context.Context, pool *pgxpool.Pool, ob *outboxd.Outbox, sinks []string, mode string) (float64, error) {
	if _, err := pool.Exec(ctx, "TRUNCATE "+eventsSchema+".messages RESTART IDENTITY"); err != nil {
		return 0, err
	}
	perTx, txs := 1, b.sz.eventsSingle
	if mode == modePublishBatch || mode == modeEnqueueBatch {
		perTx, txs = eventsBatchSize, b.sz.eventsBatches
	}
	start := time.Now()
	for range txs {
		events := make([]outboxd.Event, perTx)
		for i := range events {
			n := seq.Add(1)
			events[i] = outboxd.Event{Type: "bench.created", Key: fmt.Sprintf("e%d", n), Data: map[string]int64{"n": n}}
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			switch mode {
			case modePublishOne:
				_, err := ob.Publish(ctx, tx, events[0])
				return err
			case modePublishBatch:
				_, err := ob.PublishBatch(ctx, tx, events)
				return err
			}
			_, err := ob.EnqueueBatch(ctx, tx, sameRows(events, sinks))
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return perSecond(txs*perTx, time.Since(start).Nanoseconds()), nil
}

// sameRows are the messages publish() makes of events for the route
// "bench": one per sink, keyed type/key/route, the event as payload.
func sameRows(events []outboxd.Event, sinks []string) []outboxd.Message {
	msgs := make([]outboxd.Message, 0, len(events)*len(sinks))
	for _, ev := range events {
		payload := map[string]any{"type": ev.Type, "key": ev.Key, "data": ev.Data}
		for _, sink := range sinks {
			msgs = append(msgs, outboxd.Message{Sink: sink, DedupKey: ev.Type + "/" + ev.Key + "/bench", Payload: payload})
		}
	}
	return msgs
}
