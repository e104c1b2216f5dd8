package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testdb"
)

// A producer enqueues a message in the same transaction as its business
// write; a relay delivers it once the transaction commits.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.URL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	ob, _ := core.New("example_outbox")
	if _, err := ob.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	defer func() { _, _ = pool.Exec(ctx, "DROP SCHEMA example_outbox CASCADE") }()

	// The producer: business data and message commit together.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... INSERT INTO orders ... through tx ...
		res, err := ob.Enqueue(ctx, tx, core.Message{Sink: "greetings", DedupKey: "order-42", Payload: "Order 42 shipped"})
		fmt.Println("created:", res.Created)
		return err
	})
	if err != nil {
		panic(err)
	}

	// The relay, usually in another process.
	delivered := make(chan string, 1)
	printer := core.SinkFunc(func(ctx context.Context, d *core.Delivery) error {
		delivered <- fmt.Sprintf("%s %s %s", d.Sink, d.DedupKey, d.Payload)
		return nil
	})
	relay, err := core.NewRelay(pool, core.Config{Outbox: ob, Sinks: []core.SinkConfig{{Name: "greetings", Sink: printer}}})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- relay.Run(runCtx) }()
	select {
	case got := <-delivered:
		fmt.Println("delivered:", got)
	case <-time.After(10 * time.Second):
		fmt.Println("not delivered")
	}
	stop()
	<-done
	// Output:
	// created: true
	// delivered: greetings order-42 {"text": "Order 42 shipped"}
}

// Validate checks messages without touching the database, so a whole set
// can be refused before any of it is stored.
func ExampleOutbox_Validate() {
	ob, _ := core.New("outbox")
	lines := []core.Message{
		{Sink: "partner", DedupKey: "order-1", Payload: json.RawMessage(`{"order": 1}`)},
		{Sink: "partner", DedupKey: "order-2", Payload: json.RawMessage(`{"note": "\u0000"}`)},
	}
	for i, m := range lines {
		if err := ob.Validate(context.Background(), m); err != nil {
			fmt.Println("message", i+1, "refused:", errors.Is(err, core.ErrInvalidMessage))
		}
	}
	// Output:
	// message 2 refused: true
}
