// Package core is what an application uses to produce messages: it writes
// them into the outbox, inside its own PostgreSQL transaction, and outboxd's
// relays deliver them.
//
//   - [Enqueue] one [Message] for a sink, [EnqueueBatch] many in one
//     statement; a unique (sink, dedup key) makes a second enqueue a no-op
//     that reports the existing row ([EnqueueResult]).
//   - [Publish] an [Event] that the routes applied to the database fan out
//     into one message per target ([Published]); [Outbox.PublishBatch] many.
//   - Refusals wrap [ErrInvalidMessage] or [ErrInvalidEvent]; batches
//     name the failing element with a [BatchError].
//
// Each call takes the database handle to write through ([DBTX]): pass the
// caller's pgx transaction, and the message commits or rolls back with the
// business data. The package-level functions write to the outbox in
// [DefaultSchema]; [New] makes an [Outbox] for another schema or other
// limits.
//
// The rest of the engine has a package per audience: core/sink is the
// contract a sink implements, core/relay claims and delivers, core/operator
// answers the people running it (dead letters, redrive, pauses, stats) and
// core/migrate creates the schema.
package outboxd
