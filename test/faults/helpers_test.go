// Package faults_test injects one fault at a time into a running relay
// (an unreachable or vanishing database, a hanging or panicking sink, a
// million pending rows) and checks that the relay behaves as documented in
// docs/guarantees.md.
package faults_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// enqueue stores n messages for sink with keys prefix-0 ... prefix-(n-1).
func enqueue(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, sink, prefix string, n int) {
	t.Helper()
	msgs := make([]outboxd.Message, n)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: sink, DedupKey: fmt.Sprintf("%s-%d", prefix, i), Payload: map[string]int{"n": i}}
	}
	if _, err := ob.EnqueueBatch(context.Background(), pool, msgs); err != nil {
		t.Fatal(err)
	}
}

// accept is a sink that accepts everything: the signals count its
// deliveries.
var accept = sink.Func(func(context.Context, *sink.Delivery) error { return nil })
