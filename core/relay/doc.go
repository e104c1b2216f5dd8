// Package relay claims rows from an outbox, delivers them to their sinks and
// writes the outcomes back. Run one [Relay] in every process (a program
// makes it with its front door, outboxd.Outbox.NewRelay); relays coordinate
// through PostgreSQL alone.
//
// # Claim, deliver, finish
//
// A [Relay] runs in every process. It claims batches of rows with FOR UPDATE
// SKIP LOCKED under a lease (database clock), counts the attempt at claim
// time, delivers each row to the [sink.Sink] named by its sink column outside any
// transaction, and writes the outcome in batches guarded by the lease token:
//
//   - success: sent;
//   - [sink.RetryAfter]: rescheduled, attempt not spent, sink paused cluster-wide;
//   - [sink.Permanent] or attempts exhausted: dead (logged at ERROR), until an
//     operator redrives (operator.Operator.Redrive) or purges it;
//   - any other error: failed, retried after exponential backoff.
//
// A relay that dies mid-delivery loses its lease; another relay reclaims the
// row and marks the delivery [sink.Delivery.Uncertain]. Delivery is therefore at
// least once; sinks that can check the receiver (Slack's message
// metadata, webhook receivers de-duplicating on webhook-id) make the effect
// exactly once.
//
// # Ordering
//
// Rows sharing an ordering key are delivered strictly in id order across all
// relays: while one is in flight or waiting for its retry, later rows of the
// key wait. A dead row releases its key, so one poisoned message does not
// block its key forever; redriving it later delivers it after rows that came
// behind it. Order is id order among committed rows: two transactions that
// enqueue the same key concurrently are ordered by whichever commits first
// only if it also took the lower id.
package relay
