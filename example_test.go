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
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/routing"
)

// One Outbox per process and schema: it produces, makes relays and hands
// out the operator, the migrator, the routes and the destinations.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.URL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	ob, err := outboxd.New(pool, outboxd.Options{Schema: "example_new"})
	if err != nil {
		panic(err)
	}
	defer func() { _, _ = pool.Exec(ctx, "DROP SCHEMA example_new CASCADE") }()

	// Create or upgrade the schema at start-up: every pod may, at once.
	applied, err := ob.Migrator().Migrate(ctx, pool)
	if err != nil {
		panic(err)
	}
	fmt.Println("schema", ob.Schema(), "migrated:", len(applied) > 0)
	// Output:
	// schema example_new migrated: true
}

// A producer enqueues a message in the same transaction as its business
// write: both commit or neither does. A retried request enqueues its
// message once, by its dedup key.
func ExampleOutbox_Enqueue() {
	ctx := context.Background()
	pool, ob, cleanup := exampleOutbox(ctx, "example_enqueue")
	defer cleanup()

	for range 2 {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// ... INSERT INTO orders ... through tx ...
			res, err := ob.Enqueue(ctx, tx, outboxd.Message{Sink: "billing", DedupKey: "order-42", Payload: map[string]int{"order": 42}})
			fmt.Println("created:", res.Created)
			return err
		})
		if err != nil {
			panic(err)
		}
	}
	// Output:
	// created: true
	// created: false
}

// A relay claims and delivers the committed messages of its sinks. Run it
// in every process that delivers: relays coordinate through PostgreSQL.
func ExampleOutbox_NewRelay() {
	ctx := context.Background()
	pool, ob, cleanup := exampleOutbox(ctx, "example_relay")
	defer cleanup()
	if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "greetings", DedupKey: "order-42", Payload: "Order 42 shipped"}); err != nil {
		panic(err)
	}

	// A sink implements package core/sink's contract; sinks/* are the
	// built-in ones.
	delivered := make(chan string, 1)
	printer := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		delivered <- fmt.Sprintf("%s %s %s", d.Sink, d.DedupKey, d.Payload)
		return nil
	})
	r, err := ob.NewRelay(relay.Config{Sinks: []relay.SinkConfig{{Name: "greetings", Sink: printer}}})
	if err != nil {
		panic(err)
	}
	// r.Run(ctx) relays until ctx ends, then drains; here, until the first
	// delivery.
	runUntilDelivered(ctx, r, delivered)
	// Output:
	// delivered: greetings order-42 {"text": "Order 42 shipped"}
}

// A producer publishes an event once, in its own transaction; the routes
// applied to the database decide which sinks get a row, and the relay
// renders each row with its route's template (see package routing).
func ExampleOutbox_Publish() {
	ctx := context.Background()
	pool, ob, cleanup := exampleOutbox(ctx, "example_events")
	defer cleanup()

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
	if _, err := ob.Routes().Apply(ctx, pool, table, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}); err != nil {
		panic(err)
	}

	// The producer: business data and event commit together.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
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

	// The relay renders each published row for its sink: with its own
	// table's templates, and a version it does not have as the database
	// has it.
	r, err := ob.NewRelay(relay.Config{Sinks: []relay.SinkConfig{{Name: "greetings", Sink: printer}},
		Stage: table.Stage(ob.Routes().Fallback(pool))})
	if err != nil {
		panic(err)
	}
	runUntilDelivered(ctx, r, delivered)
	// Output:
	// row for greetings created: true
	// delivered: greetings order.shipped/order-42/orders {"line":"Order 42 shipped"}
}

// exampleOutbox returns a pool and a migrated Outbox in schema for an
// example, and a cleanup that drops the schema and closes the pool.
func exampleOutbox(ctx context.Context, schema string) (*pgxpool.Pool, *outboxd.Outbox, func()) {
	pool, err := pgxpool.New(ctx, testdb.URL())
	if err != nil {
		panic(err)
	}
	ob, err := outboxd.New(pool, outboxd.Options{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := ob.Migrator().Migrate(ctx, pool); err != nil {
		panic(err)
	}
	return pool, ob, func() {
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}
}

// exampleDeliveryTimeout bounds how long runUntilDelivered waits.
const exampleDeliveryTimeout = 10 * time.Second

// runUntilDelivered runs r until delivered reports a delivery, prints it,
// and stops r.
func runUntilDelivered(ctx context.Context, r *relay.Relay, delivered <-chan string) {
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()
	select {
	case got := <-delivered:
		fmt.Println("delivered:", got)
	case <-time.After(exampleDeliveryTimeout):
		fmt.Println("not delivered")
	}
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
}

// Validate checks messages without touching the database, so a whole set
// can be refused before any of it is stored.
func ExampleOutbox_Validate() {
	ob, _ := outboxd.New(nil, outboxd.Options{Schema: "outbox"})
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
	// nobody: 0 rows "no matching destination: the tenant has no destination subscribed to this event type whose filter the event matches, so nothing was sent"
}
