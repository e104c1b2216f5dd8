// Package outboxd is the front door of a transactional outbox on
// PostgreSQL: an application writes messages in its own transaction, and
// relays deliver them to sinks (webhooks, Slack, email, brokers) at least
// once, in order per key.
//
// One constructor gives everything, for one schema, sharing one store and
// one audit trail:
//
//	ob, err := outboxd.New(pool, outboxd.Options{Schema: "outbox"})
//	_, err = ob.Migrator().Migrate(ctx, pool) // at start-up, from any pod
//
// Produce in your transaction: the message commits or rolls back with your
// business data, and a second enqueue of its (sink, dedup key) is a no-op.
//
//	tx, err := pool.Begin(ctx)
//	// ... your writes through tx ...
//	_, err = ob.Enqueue(ctx, tx, outboxd.Message{Sink: "billing", DedupKey: "order-42", Payload: order})
//	_, err = ob.Publish(ctx, tx, outboxd.Event{Type: "order.shipped", Key: "order-42", Data: order})
//	err = tx.Commit(ctx)
//
// [Outbox.Enqueue] writes a [Message] for one sink, [Outbox.EnqueueBatch]
// many in one statement; [Outbox.Publish] writes an [Event] that the routes
// applied to the database fan out ([Outbox.Routes]). Refusals wrap
// [ErrInvalidMessage] or [ErrInvalidEvent]. The package-level [Enqueue],
// [EnqueueBatch] and [Publish] write to [DefaultSchema] without a
// constructor.
//
// Run a relay in every process that delivers; relays coordinate through
// PostgreSQL alone:
//
//	r, err := ob.NewRelay(relay.Config{Sinks: []relay.SinkConfig{{Name: "billing", Sink: mySink}}})
//	err = r.Run(ctx) // until ctx ends, then it drains
//
// Operate with [Outbox.Operator] (dead letters, redrive, purge, pauses,
// stats), [Outbox.Audit] (who did what), [Outbox.Routes] (apply routes) and
// [Outbox.Destinations] (tenants' webhook endpoints).
//
// A sink implements the contract of package core/sink and passes the checks
// of core/sink/sinktest; the built-in ones are under sinks/, and cmd.Main
// builds a binary with your own.
package outboxd
