package outboxd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// testTarget is one target of a route, as apply_routes() takes it; core's
// tests write the patterns' regular expressions by hand (package routing
// compiles them from plugins.yaml).
type testTarget struct {
	Route     string          `json:"route"`
	Sink      string          `json:"sink"`
	Position  int             `json:"position"`
	Patterns  []string        `json:"patterns"`
	ThreadKey json.RawMessage `json:"thread_key,omitempty"`
}

// Regular expressions of the patterns order.* and ** (see routing.Pattern).
const (
	reOrderAny = `^\.order\.[^.]+$`
	reAll      = `^(\.[^.]+)*$`
)

// applyRoutes applies targets as the active routes of b's outbox.
func applyRoutes(t *testing.T, b coretest.Bundle, unmatched string, targets ...testTarget) {
	t.Helper()
	raw, err := json.Marshal(targets)
	if err != nil {
		t.Fatal(err)
	}
	digest := fmt.Sprintf("%x-%s", len(raw), raw) // unique per content, which is all a digest must be here
	if _, err := b.Pool.Exec(b.Ctx, "SELECT * FROM "+b.Outbox.Schema()+".apply_routes($1, $2, $3)", digest, unmatched, raw); err != nil {
		t.Fatal(err)
	}
}

// orderRoutes: order.* to "slack" and "hook" (route orders), and every
// event to "hook" again (route audit): two rows of one sink per order event.
func orderRoutes(t *testing.T, b coretest.Bundle) {
	applyRoutes(t, b, "error",
		testTarget{Route: "orders", Sink: "slack", Position: 0, Patterns: []string{reOrderAny}},
		testTarget{Route: "orders", Sink: "hook", Position: 1, Patterns: []string{reOrderAny}},
		testTarget{Route: "audit", Sink: "hook", Position: 0, Patterns: []string{reAll}})
}

// (Mutation: publish_batch giving a repeated (type, key) a fresh dedup key
// fails this test: the second publish creates three more rows.)
func TestPublishCreatesOneRowPerTargetAndThenNothing(t *testing.T) {
	b := coretest.Setup(t)
	orderRoutes(t, b)
	ev := outboxd.Event{Type: "order.created", Key: "order-42", Data: map[string]any{"id": 42}}
	first, err := b.Outbox.Publish(b.Ctx, b.Pool, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := sinksOf(first); !slices.Equal(got, []string{"hook", "slack", "hook"}) {
		t.Fatalf("rows for sinks %v, want hook (audit), slack and hook (orders)", got)
	}
	for _, p := range first {
		if !p.Created {
			t.Errorf("first publish: row %+v not created", p)
		}
	}
	again, err := b.Outbox.Publish(b.Ctx, b.Pool, ev)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range again {
		if p.Created || p.ID != first[i].ID {
			t.Errorf("second publish: %+v, want row %d found, not created", p, first[i].ID)
		}
	}
	rows, err := b.Pool.Query(b.Ctx, "SELECT sink, dedup_key, route, payload::text, ordering_key IS NULL FROM "+b.Outbox.Schema()+".messages ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var sink, key, route, payload string
	var unordered bool
	if _, err := pgx.ForEachRow(rows, []any{&sink, &key, &route, &payload, &unordered}, func() error {
		got = append(got, fmt.Sprintf("%s %s %s %s %v", sink, key, route, payload, unordered))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	event := `{"key": "order-42", "data": {"id": 42}, "type": "order.created"}`
	want := []string{
		"hook order.created/order-42/audit audit " + event + " true",
		"slack order.created/order-42/orders orders " + event + " true",
		"hook order.created/order-42/orders orders " + event + " true",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func sinksOf(published []outboxd.Published) []string {
	var out []string
	for _, p := range published {
		out = append(out, p.Sink)
	}
	return out
}

// A publish rolled back with its transaction leaves nothing to deliver;
// a committed one afterwards shows the relay looked.
// (Mutation: Publish committing the caller's transaction fails this test:
// the rolled-back event is delivered.)
func TestPublishInRolledBackTransactionIsNeverDelivered(t *testing.T) {
	b := coretest.Setup(t)
	applyRoutes(t, b, "error", testTarget{Route: "all", Sink: "rec", Patterns: []string{reAll}})
	rec := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "rec", Sink: rec}}, PollInterval: 10 * time.Millisecond})
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.Publish(b.Ctx, tx, outboxd.Event{Type: "order.created", Key: "rolled-back"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(b.Ctx); err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(b.Ctx, b.Pool, func(tx pgx.Tx) error {
		_, err := b.Outbox.Publish(b.Ctx, tx, outboxd.Event{Type: "order.created", Key: "committed"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 10*time.Second, "", "sent", 1)
	delivered := rec.Snapshot()
	if len(delivered) != 1 || delivered[0].Route != "all" || !strings.Contains(string(delivered[0].Payload), `"committed"`) {
		t.Fatalf("delivered %+v, want only the committed event, with its route", delivered)
	}
	if got := b.StatusCounts(t); len(got) != 1 {
		t.Fatalf("rows by status = %v, want only the committed one", got)
	}
}

// (Mutation: publish_batch not raising for routes_unmatched: error fails
// this test: the unrouted type publishes with no error.)
func TestPublishRefusesWhatItCannotRoute(t *testing.T) {
	b := coretest.Setup(t)
	ev := outboxd.Event{Type: "order.created", Key: "k"}
	if _, err := b.Outbox.Publish(b.Ctx, b.Pool, ev); !errors.Is(err, outboxd.ErrNoRoute) || !strings.Contains(err.Error(), "outboxd routes apply") {
		t.Errorf("publish without routes: %v, want ErrNoRoute telling how to apply routes", err)
	}
	orderRoutes(t, b)
	for _, c := range []struct {
		ev   outboxd.Event
		want string
	}{
		{outboxd.Event{Type: "order..created", Key: "k"}, "type"},
		{outboxd.Event{Type: "", Key: "k"}, "type"},
		{outboxd.Event{Type: "order.created", Key: ""}, "key is empty"},
		{outboxd.Event{Type: "order.created", Key: "a\x01b"}, "control character"},
		{outboxd.Event{Type: "order.created", Key: "k", Data: []int{1}}, "data must be a JSON object, got array"},
		{outboxd.Event{Type: "order.created", Key: "k", Data: json.RawMessage(`{`)}, "not valid JSON"},
		{outboxd.Event{Type: "order.created", Key: "k", ThreadKey: strings.Repeat("t", 256)}, "thread_key is 256 bytes"},
	} {
		_, err := b.Outbox.Publish(b.Ctx, b.Pool, c.ev)
		if !errors.Is(err, outboxd.ErrInvalidEvent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("publish %+v: %v, want ErrInvalidEvent saying %q", c.ev, err, c.want)
		}
	}
	// Only "audit" (**) would match; without it, nothing does.
	applyRoutes(t, b, "error", testTarget{Route: "orders", Sink: "slack", Patterns: []string{reOrderAny}})
	_, err := b.Outbox.Publish(b.Ctx, b.Pool, outboxd.Event{Type: "invoice.paid", Key: "k"})
	if !errors.Is(err, outboxd.ErrNoRoute) || !strings.Contains(err.Error(), "invoice.paid") {
		t.Errorf("publish of an unrouted type: %v, want ErrNoRoute naming the type", err)
	}
	if got := b.StatusCounts(t); len(got) != 0 {
		t.Errorf("refused publishes wrote rows: %v", got)
	}
}

// With routes_unmatched: drop an unrouted event is a no-op that the
// database counts; maintenance folds the count into its totals.
// (Mutation: publish_batch not inserting into events_dropped fails this
// test: 0 drops folded.)
func TestUnmatchedEventsAreDroppedAndCounted(t *testing.T) {
	b := coretest.Setup(t)
	applyRoutes(t, b, "drop", testTarget{Route: "orders", Sink: "rec", Patterns: []string{reOrderAny}})
	for i := range 3 {
		published, err := b.Outbox.Publish(b.Ctx, b.Pool, outboxd.Event{Type: "invoice.paid", Key: fmt.Sprint(i)})
		if err != nil || len(published) != 0 {
			t.Fatalf("publish of an unrouted type: %v %v, want no rows and no error", published, err)
		}
	}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "rec", Sink: coretest.NewRecordingSink()}}})
	// The relay's first maintenance round runs at its start, after the
	// drops were counted.
	signals.Maintained.WaitCount(t, 10*time.Second, "a maintenance round", 1)
	var folded int64
	if err := b.Pool.QueryRow(b.Ctx, "SELECT coalesce(sum(dropped), 0) FROM "+b.Outbox.Schema()+".events_dropped_totals WHERE event_type = 'invoice.paid'").Scan(&folded); err != nil || folded != 3 {
		t.Fatalf("%d drops folded into the totals (%v), want 3", folded, err)
	}
}

func TestPublishBatchAnswersPerEventInOrder(t *testing.T) {
	b := coretest.Setup(t)
	orderRoutes(t, b)
	events := []outboxd.Event{
		{Type: "order.created", Key: "1"},
		{Type: "user.created", Key: "2"},
		{Type: "order.created", Key: "1"}, // a duplicate of the first, within the batch
	}
	got, err := b.Outbox.PublishBatch(b.Ctx, b.Pool, events)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(got[0]) != 3 || len(got[1]) != 1 || len(got[2]) != 3 {
		t.Fatalf("rows per event = %v, want 3, 1 and 3", got)
	}
	for i, p := range got[2] {
		if p.Created || p.ID != got[0][i].ID {
			t.Errorf("the repeated event's row %+v, want row %d found", p, got[0][i].ID)
		}
	}
	if !(got[0][0].ID < got[1][0].ID) {
		t.Errorf("ids do not follow the batch's order: %v", got)
	}
	_, err = b.Outbox.PublishBatch(b.Ctx, b.Pool, []outboxd.Event{{Type: "order.created", Key: "3"}, {Type: "bad..type", Key: "4"}})
	if !errors.Is(err, outboxd.ErrInvalidEvent) || !strings.Contains(err.Error(), `event 2: type "bad..type"`) {
		t.Fatalf("a batch with a bad event: %v, want ErrInvalidEvent naming event 2", err)
	}
	if be := (*outboxd.BatchError)(nil); !errors.As(err, &be) || be.Index != 1 {
		t.Errorf("a batch with a bad second event: %#v, want a *outboxd.BatchError with Index 1", err)
	}
	if n := b.StatusCounts(t)["pending"]; n != 4 {
		t.Errorf("%d rows after the failed batch, want the 4 of the first batch", n)
	}
}

// threadSink records what each delivery saw of its thread and gives each
// row a receipt naming it.
type threadSink struct {
	mu    sync.Mutex
	seen  []threadDelivery
	delay time.Duration
}

type threadDelivery struct {
	id         int64
	sink, key  string
	threadRoot string
}

func (s *threadSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	time.Sleep(s.delay) // gives a later row of the thread the chance to overtake, were it claimable
	s.mu.Lock()
	s.seen = append(s.seen, threadDelivery{id: d.ID, sink: d.Sink, key: d.ThreadKey, threadRoot: string(d.ThreadRoot)})
	s.mu.Unlock()
	return d.SetReceipt(map[string]int64{"row": d.ID})
}

func (s *threadSink) snapshot() []threadDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// The rows of a thread are delivered in order, each sink's first one
// without a root and the later ones with the first one's receipt, which
// outlives the root row (here deleted as soon as it is sent).
// (Mutations: claim.sql reading the root's receipt from its row instead of
// threads fails this test: the deleted root leaves the replies no root;
// publish_batch not ordering by thread_key fails it: replies overtake it.)
func TestThreadRowsGetTheirFirstRowsReceipt(t *testing.T) {
	b := coretest.Setup(t)
	applyRoutes(t, b, "error",
		testTarget{Route: "incidents", Sink: "chat", Patterns: []string{reAll}},
		testTarget{Route: "incidents", Sink: "pager", Position: 1, Patterns: []string{reAll},
			// A template's thread_key: "page-" + .data.team.
			ThreadKey: json.RawMessage(`[{"text": "page-"}, {"data": ["team"]}]`)})
	fake := &threadSink{delay: 20 * time.Millisecond}
	cfg := relay.Config{DeleteOnSent: true, PollInterval: 10 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "chat", Sink: fake}, {Name: "pager", Sink: fake}}}
	signals := &relaysignal.Relay{}
	for range 2 {
		testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
	}
	for i := range 3 {
		ev := outboxd.Event{Type: "incident.updated", Key: fmt.Sprint(i), ThreadKey: "inc-7", Data: map[string]string{"team": "db"}}
		if _, err := b.Outbox.Publish(b.Ctx, b.Pool, ev); err != nil {
			t.Fatal(err)
		}
	}
	signals.WaitWritten(t, 30*time.Second, "", "sent", 6)
	if n := len(fake.snapshot()); n != 6 {
		t.Fatalf("%d deliveries, want 6", n)
	}
	bySink := map[string][]threadDelivery{}
	for _, d := range fake.snapshot() {
		bySink[d.sink] = append(bySink[d.sink], d)
	}
	for name, key := range map[string]string{"chat": "inc-7", "pager": "page-db"} {
		ds := bySink[name]
		if len(ds) != 3 {
			t.Fatalf("%s: %d deliveries, want 3", name, len(ds))
		}
		root := fmt.Sprintf(`{"row": %d}`, ds[0].id)
		for i, d := range ds {
			wantRoot := root
			if i == 0 {
				wantRoot = ""
			}
			if d.key != key || d.threadRoot != wantRoot || (i > 0 && d.id < ds[i-1].id) {
				t.Errorf("%s delivery %d: %+v, want thread %s, root %q, in order", name, i, d, key, wantRoot)
			}
		}
	}
}

// The keys publish() derives are held to the explicit keys' rules: a
// thread key a route's template makes from the event's data is refused
// over 255 bytes or with a control character (at 3 KB it used to fail the
// insert with SQLSTATE 54000, an index row too large), as an invalid event
// naming the event and the route, through Go, a batch and SQL. Data jsonb
// cannot store is refused in Go before any statement, and so is a sink
// name over the key limit in Enqueue.
// (Mutations, each failing this test: migration 007 without the derived
// keys' check (the 1,000 and 3,000-byte thread keys stored); encodeEvent without
// jsonbEscapeProblem (the database's 22P05 reaches the caller);
// validate checking the sink only for being empty.)
func TestPublishRefusesDerivedKeysLikeExplicitOnes(t *testing.T) {
	b := coretest.Setup(t)
	applyRoutes(t, b, "error", testTarget{Route: "customers", Sink: "hook", Patterns: []string{reOrderAny},
		ThreadKey: json.RawMessage(`[{"text": "c-"}, {"data": ["customer"]}]`)})
	for _, c := range []struct{ customer, want string }{
		{strings.Repeat("x", 1000), "event order.created/k, route customers: its thread_key template makes a thread key of 1002 bytes, over the limit of 255"},
		{strings.Repeat("x", 3000), "thread key of 3002 bytes"},
		{"a\x01b", "holds a control character"},
	} {
		_, err := b.Outbox.Publish(b.Ctx, b.Pool, outboxd.Event{Type: "order.created", Key: "k", Data: map[string]string{"customer": c.customer}})
		if !errors.Is(err, outboxd.ErrInvalidEvent) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("publish with a %d-byte customer: %v, want ErrInvalidEvent saying %q", len(c.customer), err, c.want)
		}
	}
	_, err := b.Outbox.PublishBatch(b.Ctx, b.Pool, []outboxd.Event{
		{Type: "order.created", Key: "ok", Data: map[string]string{"customer": "ann"}},
		{Type: "order.created", Key: "long", Data: map[string]string{"customer": strings.Repeat("x", 300)}}})
	var batchErr *outboxd.BatchError
	if !errors.As(err, &batchErr) || batchErr.Index != 1 || !strings.Contains(err.Error(), "event 2: event order.created/long, route customers") {
		t.Errorf("batch with a long derived key second: %v, want a BatchError for index 1 naming it", err)
	}
	var state string
	_, err = b.Pool.Exec(b.Ctx, "SELECT * FROM "+b.Outbox.Schema()+".publish('order.created', 'k', jsonb_build_object('customer', repeat('x', 3000)))")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		state = pgErr.Code
	}
	if state != "22023" || !strings.Contains(err.Error(), "route customers") {
		t.Errorf("publish() in SQL with a 3 KB derived thread key: %v (SQLSTATE %s), want 22023 naming the route", err, state)
	}

	for _, data := range []string{`{"customer": "a\u0000b"}`, `{"customer": "\ud800"}`, "{\"customer\": \"\xff\"}"} {
		_, err := b.Outbox.Publish(b.Ctx, refusingDB{}, outboxd.Event{Type: "order.created", Key: "k", Data: json.RawMessage(data)})
		if !errors.Is(err, outboxd.ErrInvalidEvent) || !strings.Contains(err.Error(), "data: ") {
			t.Errorf("publish of data %q: %v, want ErrInvalidEvent naming data before any statement", data, err)
		}
	}
	_, err = b.Outbox.Enqueue(b.Ctx, refusingDB{}, outboxd.Message{Sink: strings.Repeat("s", 256), DedupKey: "k", Payload: map[string]int{"n": 1}})
	if !errors.Is(err, outboxd.ErrInvalidMessage) || !strings.Contains(err.Error(), "sink is 256 bytes") {
		t.Errorf("enqueue to a 256-byte sink name: %v, want ErrInvalidMessage", err)
	}
	if got := b.StatusCounts(t); len(got) != 0 {
		t.Errorf("refused publishes wrote rows: %v", got)
	}
}

// refusingDB is a database handle that fails every statement: what is
// refused before the database is never sent.
type refusingDB struct{}

func (refusingDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("a statement reached the database")
}

func (refusingDB) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("a statement reached the database")
}

func (refusingDB) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errors.New("a statement reached the database") }
