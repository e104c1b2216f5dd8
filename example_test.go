package outboxd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/routing"
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
	m, _ := migrate.New("example_outbox")
	if _, err := m.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	ob, _ := outboxd.New(outboxd.Options{Schema: "example_outbox"})
	defer func() { _, _ = pool.Exec(ctx, "DROP SCHEMA example_outbox CASCADE") }()

	// The producer: business data and message commit together.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... INSERT INTO orders ... through tx ...
		res, err := ob.Enqueue(ctx, tx, outboxd.Message{Sink: "greetings", DedupKey: "order-42", Payload: "Order 42 shipped"})
		fmt.Println("created:", res.Created)
		return err
	})
	if err != nil {
		panic(err)
	}

	// The relay, usually in another process.
	delivered := make(chan string, 1)
	printer := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		delivered <- fmt.Sprintf("%s %s %s", d.Sink, d.DedupKey, d.Payload)
		return nil
	})
	relayUntilDelivered(ctx, pool, relay.Config{Schema: ob.Schema(), Sinks: []relay.SinkConfig{{Name: "greetings", Sink: printer}}}, delivered)
	// Output:
	// created: true
	// delivered: greetings order-42 {"text": "Order 42 shipped"}
}

// A producer publishes an event once, in its own transaction; the routes
// applied to the database decide which sinks get a row, and the relay
// renders each row with its route's template (see package routing).
func ExamplePublish() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.URL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	m, _ := migrate.New("example_events")
	if _, err := m.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	ob, _ := outboxd.New(outboxd.Options{Schema: "example_events"})
	defer func() { _, _ = pool.Exec(ctx, "DROP SCHEMA example_events CASCADE") }()

	// The sink, and routes as plugins.yaml would give them: order events
	// reach "greetings" as a line of text. `outboxd routes apply` (or
	// `outboxd migrate`) does this part in a deployment.
	delivered := make(chan string, 1)
	printer := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		delivered <- fmt.Sprintf("%s %s %s", d.Sink, d.DedupKey, d.Payload)
		return nil
	})
	sinks := map[string]sink.Sink{"greetings": printer}
	cfg, _ := routing.Parse(map[string]any{"orders": map[string]any{
		"events": []any{"order.*"},
		"to":     []any{map[string]any{"sink": "greetings", "template": map[string]any{"line": "Order {{.data.id}} {{.data.status}}"}}},
	}}, "")
	table, problems := routing.Compile(cfg, sinks)
	if len(problems) > 0 {
		panic(fmt.Sprint(problems))
	}
	if _, err := routing.Apply(ctx, pool, ob.Schema(), table, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}); err != nil {
		panic(err)
	}

	// The producer: business data and event commit together.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... UPDATE orders ... through tx ...
		published, err := ob.Publish(ctx, tx, outboxd.Event{Type: "order.shipped", Key: "order-42",
			Data: map[string]any{"id": 42, "status": "shipped"}})
		for _, p := range published {
			fmt.Println("row for", p.Sink, "created:", p.Created)
		}
		return err
	})
	if err != nil {
		panic(err)
	}

	// The relay renders each published row for its sink.
	fallback, err := routing.DBFallback(pool, ob.Schema())
	if err != nil {
		panic(err)
	}
	relayUntilDelivered(ctx, pool, relay.Config{Schema: ob.Schema(),
		Sinks: []relay.SinkConfig{{Name: "greetings", Sink: printer}}, Stage: table.Stage(fallback)}, delivered)
	// Output:
	// row for greetings created: true
	// delivered: greetings order.shipped/order-42/orders {"line":"Order 42 shipped"}
}

// relayUntilDelivered runs a relay with cfg until delivered reports a
// delivery, and prints it.
func relayUntilDelivered(ctx context.Context, pool *pgxpool.Pool, cfg relay.Config, delivered <-chan string) {
	r, err := relay.New(pool, cfg)
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()
	select {
	case got := <-delivered:
		fmt.Println("delivered:", got)
	case <-time.After(10 * time.Second):
		fmt.Println("not delivered")
	}
	stop()
	<-done
}

// Validate checks messages without touching the database, so a whole set
// can be refused before any of it is stored.
func ExampleOutbox_Validate() {
	ob, _ := outboxd.New(outboxd.Options{Schema: "outbox"})
	lines := []outboxd.Message{
		{Sink: "partner", DedupKey: "order-1", Payload: json.RawMessage(`{"order": 1}`)},
		{Sink: "partner", DedupKey: "order-2", Payload: json.RawMessage(`{"note": "\u0000"}`)},
	}
	for i, m := range lines {
		if err := ob.Validate(context.Background(), m); err != nil {
			fmt.Println("message", i+1, "refused:", errors.Is(err, outboxd.ErrInvalidMessage))
		}
	}
	// Output:
	// message 2 refused: true
}

// A fan-out that made no row says why, for the answer to the publish.
func ExampleFanOut_Note() {
	for _, f := range []outboxd.FanOut{{Tenant: "acme", Destinations: 2}, {Tenant: "nobody"}} {
		fmt.Printf("%s: %d rows %q\n", f.Tenant, f.Destinations, f.Note())
	}
	// Output:
	// acme: 2 rows ""
	// nobody: 0 rows "no matching destination: the tenant has no destination subscribed to this event type, so nothing was sent"
}
