package outboxd_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

func TestEnqueueConcurrentDuplicatesCreateOneRow(t *testing.T) {
	b := coretest.Setup(t)
	const producers = 50
	var wg sync.WaitGroup
	results := make([]outboxd.EnqueueResult, producers)
	errs := make([]error, producers)
	for i := range producers {
		wg.Go(func() {
			results[i], errs[i] = b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "same", Payload: "hello"})
		})
	}
	wg.Wait()
	created := 0
	for i := range producers {
		if errs[i] != nil {
			t.Fatalf("producer %d: %v", i, errs[i])
		}
		if results[i].Created {
			created++
		}
		if results[i].ID != results[0].ID {
			t.Errorf("producer %d got id %d, producer 0 got %d", i, results[i].ID, results[0].ID)
		}
	}
	if created != 1 {
		t.Fatalf("created = %d, want exactly 1", created)
	}
	if n := b.StatusCounts(t)["pending"]; n != 1 {
		t.Fatalf("pending rows = %d, want 1", n)
	}
}

// A message enqueued in a transaction that rolls back is never delivered;
// a committed one enqueued afterwards shows the relay ran past it.
// (Mutation: Enqueue committing the caller's transaction early fails this
// test.)
func TestEnqueueInRolledBackTransactionIsNeverDelivered(t *testing.T) {
	b := coretest.Setup(t)
	sink := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "rec", Sink: sink}}, PollInterval: 10 * time.Millisecond})

	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.Enqueue(b.Ctx, tx, outboxd.Message{Sink: "rec", DedupKey: "rolled-back", Payload: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(b.Ctx); err != nil {
		t.Fatal(err)
	}
	// A committed message enqueued afterwards is the witness that the relay
	// ran through the table after the rollback.
	err = pgx.BeginFunc(b.Ctx, b.Pool, func(tx pgx.Tx) error {
		_, err := b.Outbox.Enqueue(b.Ctx, tx, outboxd.Message{Sink: "rec", DedupKey: "committed", Payload: "yes"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 10*time.Second, "rec", "sent", 1)
	for _, d := range sink.Snapshot() {
		if d.DedupKey != "committed" {
			t.Fatalf("delivered %q, which was rolled back", d.DedupKey)
		}
	}
	if got := b.StatusCounts(t); got["sent"] != 1 || len(got) != 1 {
		t.Fatalf("rows by status = %v, want only the committed one, sent", got)
	}
}

// Every invalid message is refused with ErrInvalidMessage and the reason,
// before any statement runs. (Mutation: checkJSONBEscapes accepting
// everything fails this test.)
func TestEnqueueValidation(t *testing.T) {
	b := coretest.Setup(t)
	tests := []struct {
		name string
		msg  outboxd.Message
		want string
	}{
		{"empty sink", outboxd.Message{DedupKey: "k", Payload: "x"}, "sink is empty"},
		{"empty key", outboxd.Message{Sink: "s", Payload: "x"}, "dedup key is empty"},
		{"long key", outboxd.Message{Sink: "s", DedupKey: strings.Repeat("k", 256), Payload: "x"}, "over the limit of 255"},
		{"unprintable key", outboxd.Message{Sink: "s", DedupKey: "a\x00b", Payload: "x"}, "not printable"},
		{"invalid JSON", outboxd.Message{Sink: "s", DedupKey: "k", Payload: json.RawMessage(`{"a":`)}, "not valid JSON"},
		{"no payload", outboxd.Message{Sink: "s", DedupKey: "k"}, "payload is empty"},
		{"too big", outboxd.Message{Sink: "s", DedupKey: "k", Payload: strings.Repeat("x", outboxd.DefaultMaxPayloadBytes)}, "over the limit"},
		{"negative max attempts", outboxd.Message{Sink: "s", DedupKey: "k", Payload: "x", MaxAttempts: -1}, "max attempts"},
		// encoding/json writes a Go string's NUL as \u0000, which jsonb refuses.
		{"NUL in a string payload", outboxd.Message{Sink: "s", DedupKey: "k", Payload: "a\x00b"}, `payload: \u0000`},
		{"NUL in a payload's field", outboxd.Message{Sink: "s", DedupKey: "k", Payload: map[string]string{"k": "\x00"}}, `payload: \u0000`},
		{"NUL in a header", outboxd.Message{Sink: "s", DedupKey: "k", Payload: "x", Headers: map[string]string{"x-id": "1\x002"}}, `headers: \u0000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.Outbox.Enqueue(b.Ctx, b.Pool, tt.msg)
			if !errors.Is(err, outboxd.ErrInvalidMessage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidMessage mentioning %q", err, tt.want)
			}
		})
	}
	if n := len(b.StatusCounts(t)); n != 0 {
		t.Fatalf("invalid messages reached the table")
	}
}

func TestEnqueueStoresPlainStringAsText(t *testing.T) {
	b := coretest.Setup(t)
	res, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "k", Payload: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	var payload string
	if err := b.Pool.QueryRow(b.Ctx, "SELECT payload::text FROM "+b.Outbox.Schema()+".messages WHERE id = $1", res.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if payload != `{"text": "hello"}` {
		t.Fatalf("payload = %s", payload)
	}
}

func TestEnqueueBatchReportsCreatedAndDuplicates(t *testing.T) {
	b := coretest.Setup(t)
	first, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "old", Payload: "x"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []outboxd.Message{
		{Sink: "s", DedupKey: "new-1", Payload: "a"},
		{Sink: "s", DedupKey: "old", Payload: "b"},
		{Sink: "s", DedupKey: "new-2", Payload: "c", OrderingKey: "o", MaxAttempts: 3},
		{Sink: "s", DedupKey: "new-1", Payload: "d"},
		{Sink: "t", DedupKey: "old", Payload: "e"},
	}
	res, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, msgs)
	if err != nil {
		t.Fatal(err)
	}
	wantCreated := []bool{true, false, true, false, true}
	for i, r := range res {
		if r.Created != wantCreated[i] {
			t.Errorf("message %d: created = %v, want %v", i, r.Created, wantCreated[i])
		}
		if r.ID == 0 {
			t.Errorf("message %d: no id", i)
		}
	}
	if res[1].ID != first.ID || res[3].ID != res[0].ID {
		t.Errorf("duplicates must report the existing row's id: %+v", res)
	}
	if res[2].ID <= res[0].ID {
		t.Errorf("ids must follow the batch order: %+v", res)
	}
	if _, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, []outboxd.Message{{Sink: "s", DedupKey: "ok", Payload: "x"}, {Sink: "", DedupKey: "k", Payload: "x"}}); !errors.Is(err, outboxd.ErrInvalidMessage) {
		t.Fatalf("an invalid message must fail the whole batch, got %v", err)
	} else if be := (*outboxd.BatchError)(nil); !errors.As(err, &be) || be.Index != 1 {
		t.Errorf("the invalid second message: %#v, want a *outboxd.BatchError with Index 1", err)
	}
	if n := b.StatusCounts(t)["pending"]; n != 4 {
		t.Fatalf("pending = %d, want 4", n)
	}
}

// TestEnqueueBatchStoresEveryOptionalColumn enqueues one batch per
// combination of the optional fields (headers, ordering key, max attempts,
// available at), with only the first message of each batch setting them:
// EnqueueBatch sends only the columns a batch uses, and a column set for
// one message must not leak into its neighbours.
func TestEnqueueBatchStoresEveryOptionalColumn(t *testing.T) {
	b := coretest.Setup(t)
	later := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for combo := range 16 {
		set := func(bit int) bool { return combo&(1<<bit) != 0 }
		first := outboxd.Message{Sink: "s", DedupKey: fmt.Sprintf("%d-a", combo), Payload: "a"}
		if set(0) {
			first.Headers = map[string]string{"h": "v"}
		}
		if set(1) {
			first.OrderingKey = "o"
		}
		if set(2) {
			first.MaxAttempts = 7
		}
		if set(3) {
			first.AvailableAt = later
		}
		plain := outboxd.Message{Sink: "s", DedupKey: fmt.Sprintf("%d-b", combo), Payload: "b"}
		res, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, []outboxd.Message{first, plain})
		if err != nil {
			t.Fatalf("combination %04b: %v", combo, err)
		}
		type stored struct {
			headers     string
			ordering    *string
			maxAttempts *int
			future      bool
		}
		read := func(id int64) stored {
			var s stored
			err := b.Pool.QueryRow(b.Ctx, `SELECT headers::text, ordering_key, max_attempts, available_at > now() + interval '1 minute'
				FROM `+b.Outbox.Schema()+`.messages WHERE id = $1`, id).Scan(&s.headers, &s.ordering, &s.maxAttempts, &s.future)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		got, neighbour := read(res[0].ID), read(res[1].ID)
		if (got.headers == `{"h": "v"}`) != set(0) || (got.ordering != nil) != set(1) ||
			(got.maxAttempts != nil && *got.maxAttempts == 7) != set(2) || got.future != set(3) {
			t.Errorf("combination %04b: stored %+v", combo, got)
		}
		if neighbour.headers != "{}" || neighbour.ordering != nil || neighbour.maxAttempts != nil || neighbour.future {
			t.Errorf("combination %04b: the plain message got %+v", combo, neighbour)
		}
	}
}

// TestEnqueueBatchInTransaction covers both ways EnqueueBatch inserts inside
// the caller's transaction: a batch of new keys (the plain INSERT, in a
// savepoint) and a batch repeating a key (the savepoint rolled back, then ON
// CONFLICT). The caller's own writes before and after must survive, and the
// ids must follow the batch's order.
func TestEnqueueBatchInTransaction(t *testing.T) {
	b := coretest.Setup(t)
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.Ctx)
	before, err := b.Outbox.Enqueue(b.Ctx, tx, outboxd.Message{Sink: "s", DedupKey: "before", Payload: "x"})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := b.Outbox.EnqueueBatch(b.Ctx, tx, []outboxd.Message{
		{Sink: "s", DedupKey: "f1", Payload: "x"}, {Sink: "s", DedupKey: "f2", Payload: "x"}, {Sink: "t", DedupKey: "f1", Payload: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range fresh {
		if !r.Created || r.ID <= before.ID || (i > 0 && r.ID <= fresh[i-1].ID) {
			t.Errorf("fresh batch: %+v, want created rows with ids after %d in batch order", fresh, before.ID)
			break
		}
	}
	mixed, err := b.Outbox.EnqueueBatch(b.Ctx, tx, []outboxd.Message{
		{Sink: "s", DedupKey: "m1", Payload: "x"}, {Sink: "s", DedupKey: "before", Payload: "x"}, {Sink: "s", DedupKey: "m2", Payload: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !mixed[0].Created || mixed[1].Created || mixed[1].ID != before.ID || !mixed[2].Created || mixed[2].ID <= mixed[0].ID {
		t.Errorf("mixed batch: %+v, want created, duplicate of %d, created", mixed, before.ID)
	}
	if _, err := b.Outbox.Enqueue(b.Ctx, tx, outboxd.Message{Sink: "s", DedupKey: "after", Payload: "x"}); err != nil {
		t.Fatalf("the transaction must stay usable after a batch with a duplicate: %v", err)
	}
	if err := tx.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.StatusCounts(t)["pending"]; n != 7 {
		t.Fatalf("pending = %d, want 7 (before, 3 fresh, 2 mixed, after)", n)
	}
}
