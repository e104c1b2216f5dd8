package destinations_test

import (
	"context"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/routing"
	sinkdest "github.com/outboxd/outboxd/sinks/destinations"
)

// TestGoPublishSaysWhenNoDestinationMatched: Go's Publish and
// PublishBatch answer, for the row of a target with a tenant, what its
// fan-out made (outboxd.Published.FanOut): the tenant and how many
// destination rows, with the note "no matching destination" when none,
// in the producer's transaction; the row of a target without a tenant
// has none. The note is the one HTTP and the CLI print.
//
// Mutations, each failing this test: publish.sql answering fans_out
// false for every row (no FanOut anywhere); readFanOuts leaving the
// FanOut unset; PublishBatch not reading the fan-outs; Note answering ""
// for 0 destinations.
func TestGoPublishSaysWhenNoDestinationMatched(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	customers, err := sinkdest.Type.New("customers", nil, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ledger := sink.Func(func(context.Context, *sink.Delivery) error { return nil })
	table, problems := routing.Compile(routing.Config{Unmatched: routing.UnmatchedDrop, Routes: map[string]routing.Route{
		"billing": {Events: []string{"order.*"}, To: []routing.Target{{Sink: "customers", Tenant: "{{.data.account_id}}"}}},
		"books":   {Events: []string{"order.*"}, To: []routing.Target{{Sink: "ledger"}}},
	}}, map[string]sink.Sink{"customers": customers, "ledger": ledger})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if _, err := f.ob.Routes().Apply(ctx, f.pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	f.create(t, "acme", "order.*")
	f.create(t, "acme", "order.*")

	// fanOuts is what each row of an event says, by sink.
	fanOuts := func(published []outboxd.Published) map[string]*outboxd.FanOut {
		t.Helper()
		out := map[string]*outboxd.FanOut{}
		for _, p := range published {
			out[p.Sink] = p.FanOut
		}
		if len(out) != 2 {
			t.Fatalf("published %+v; want a row of customers and one of ledger", published)
		}
		return out
	}
	check := func(what string, published []outboxd.Published, tenant string, destinations int) {
		t.Helper()
		got := fanOuts(published)
		if got["ledger"] != nil {
			t.Errorf("%s: the ledger row (a target without a tenant) has the fan-out %+v", what, *got["ledger"])
		}
		c := got["customers"]
		switch {
		case c == nil:
			t.Errorf("%s: the customers row says nothing of its fan-out", what)
		case c.Tenant != tenant || c.Destinations != destinations:
			t.Errorf("%s: fan-out %+v; want %d destinations of %s", what, *c, destinations, tenant)
		case (destinations == 0) != (c.Note() != "") || (destinations == 0 && c.Note() != noMatchNote):
			t.Errorf("%s: note %q", what, c.Note())
		}
	}

	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("publish in a transaction for acme", f.publish(t, tx, "order.created", "o1", "acme"), "acme", 2)
	check("publish in a transaction for nobody", f.publish(t, tx, "order.created", "o2", "nobody"), "nobody", 0)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	batch, err := f.ob.PublishBatch(ctx, f.pool, []outboxd.Event{
		{Type: "order.paid", Key: "o1", Data: map[string]any{"account_id": "nobody"}},
		{Type: "order.paid", Key: "o2", Data: map[string]any{"account_id": "acme"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	check("the batch's first event", batch[0], "nobody", 0)
	check("the batch's second event", batch[1], "acme", 2)
}

// noMatchNote is the note of a fan-out that made nothing, as HTTP and
// the CLI print it (docs/destinations.md).
const noMatchNote = "no matching destination: the tenant has no destination subscribed to this event type whose filter the event matches, so nothing was sent"
