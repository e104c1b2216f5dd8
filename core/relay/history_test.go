package relay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// enqueuePath is one of the ways a producer stores a message: each must
// refuse a key the retention window holds.
type enqueuePath struct {
	name    string
	enqueue func(ctx context.Context, b coretest.Bundle, db outboxd.DBTX, key string) (outboxd.EnqueueResult, error)
}

var enqueuePaths = []enqueuePath{
	{"Enqueue", func(ctx context.Context, b coretest.Bundle, db outboxd.DBTX, key string) (outboxd.EnqueueResult, error) {
		return b.Outbox.Enqueue(ctx, db, outboxd.Message{Sink: "s", DedupKey: key, Payload: map[string]string{"k": key}})
	}},
	{"EnqueueBatch", func(ctx context.Context, b coretest.Bundle, db outboxd.DBTX, key string) (outboxd.EnqueueResult, error) {
		res, err := b.Outbox.EnqueueBatch(ctx, db, []outboxd.Message{
			{Sink: "s", DedupKey: key, Payload: map[string]string{"k": key}},
			{Sink: "s", DedupKey: key, Payload: map[string]string{"k": key, "again": "yes"}}})
		if err != nil {
			return outboxd.EnqueueResult{}, err
		}
		if res[1].Created || res[1].ID != res[0].ID {
			return res[0], fmt.Errorf("a key repeated within the batch: %+v", res)
		}
		return res[0], nil
	}},
	{"enqueue()", func(ctx context.Context, b coretest.Bundle, db outboxd.DBTX, key string) (outboxd.EnqueueResult, error) {
		var r outboxd.EnqueueResult
		err := db.QueryRow(ctx, "SELECT id, created FROM "+b.Outbox.Schema()+".enqueue('s', $1, jsonb_build_object('k', $1::text))", key).
			Scan(&r.ID, &r.Created)
		return r, err
	}},
}

// rowsOf returns where the rows of key are: how many in messages and how
// many in messages_history.
func rowsOf(t *testing.T, b coretest.Bundle, key string) (hot, history int) {
	t.Helper()
	err := b.Pool.QueryRow(b.Ctx, "SELECT (SELECT count(*) FROM "+b.Outbox.Schema()+".messages WHERE dedup_key = $1), "+
		"(SELECT count(*) FROM "+b.Outbox.Schema()+".messages_history WHERE dedup_key = $1)", key).Scan(&hot, &history)
	if err != nil {
		t.Fatal(err)
	}
	return hot, history
}

// A delivered row leaves messages for messages_history, and its key keeps
// refusing the same (sink, dedup key) on every enqueue path for the whole
// retention, then is accepted again once retention truncated its slot.
//
// Mutation: the finish dropping the key when it moves the row (finish.sql:
// unkeyed without "@delete_sent AND", keyed inserting nothing) makes the
// enqueue after the move create a second row. Mutation: history_expiring() ignoring closed_at makes the key
// come back before the retention has passed.
func TestDeliveredKeyDeduplicatesForTheRetentionThenFrees(t *testing.T) {
	b := coretest.Setup(t)
	const retention = 3 * time.Second
	first, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "order-1", Payload: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 10 * time.Millisecond,
		SentRetention: retention, MaintenanceInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 1)
	if hot, history := rowsOf(t, b, "order-1"); hot != 0 || history != 1 {
		t.Fatalf("a delivered row: %d in messages, %d in messages_history; want it moved", hot, history)
	}
	var sentAt time.Time
	if err := b.Pool.QueryRow(b.Ctx, "SELECT sent_at FROM "+b.Outbox.Schema()+".messages_history WHERE id = $1", first.ID).Scan(&sentAt); err != nil {
		t.Fatal(err)
	}
	for _, p := range enqueuePaths {
		res, err := p.enqueue(b.Ctx, b, b.Pool, "order-1")
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if res.Created || res.ID != first.ID {
			t.Fatalf("%s of a delivered key within retention: %+v, want the delivered row %d refused as a duplicate", p.name, res, first.ID)
		}
	}
	if stored, err := b.Outbox.MessageByKey(b.Ctx, b.Pool, "s", "order-1"); err != nil || stored.ID != first.ID || stored.SentAt == nil {
		t.Fatalf("looking up the delivered row by key: %+v, %v", stored, err)
	}

	// Each try rolls back unless it created the row, so the key is only
	// taken once retention freed it.
	var again outboxd.EnqueueResult
	var acceptedAt time.Time
	testrelay.WaitFor(t, 30*time.Second, "the key accepted again after retention", func() bool {
		tx, err := b.Pool.Begin(b.Ctx)
		if err != nil {
			return false
		}
		defer tx.Rollback(b.Ctx) //nolint:errcheck // committed when created
		again, err = b.Outbox.Enqueue(b.Ctx, tx, outboxd.Message{Sink: "s", DedupKey: "order-1", Payload: map[string]int{"n": 2}})
		if err != nil || !again.Created {
			return false
		}
		acceptedAt = time.Now()
		return tx.Commit(b.Ctx) == nil
	})
	if lived := acceptedAt.Sub(sentAt); lived < retention {
		t.Fatalf("the key came back %s after its delivery, within the %s retention", lived, retention)
	}
	if again.ID == first.ID {
		t.Fatalf("the new row reused id %d", again.ID)
	}
	// The slot's keys go first, then the slot is truncated: a truncation
	// that waited too long for its lock (a loaded machine) is done in a
	// later maintenance round, so the old row may outlive its key briefly.
	testrelay.WaitFor(t, 30*time.Second, "only the new row left after retention", func() bool {
		hot, history := rowsOf(t, b, "order-1")
		return hot+history == 1
	})
}

// Producers on every enqueue path (one of them in REPEATABLE READ
// transactions) enqueue the same keys over and over while a relay delivers
// them, so finishes move rows to history while producers enqueue their
// keys: each key ends with exactly one row, created exactly once.
//
// Mutation: the finish dropping the key when it moves the row (as in the
// test above) makes a producer racing the move fail to find the key's row
// or create a second one.
func TestConcurrentProducersAndRelayNeverDuplicateAKey(t *testing.T) {
	b := coretest.Setup(t)
	const keys, rounds = 150, 3
	rec := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 5 * time.Millisecond, BatchSize: 20,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: rec}}})

	type producer struct {
		path        enqueuePath
		repeatable  bool
		created, ok int
	}
	producers := []*producer{{path: enqueuePaths[0]}, {path: enqueuePaths[1]}, {path: enqueuePaths[2]}, {path: enqueuePaths[0], repeatable: true}}
	var wg sync.WaitGroup
	errs := make(chan error, len(producers))
	for i, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for range rounds {
				for _, k := range rng.Perm(keys) {
					res, err := enqueueRetrying(b, p.path, p.repeatable, fmt.Sprintf("key-%d", k))
					if err != nil {
						errs <- fmt.Errorf("%s (repeatable read %v): %w", p.path.name, p.repeatable, err)
						return
					}
					if res.Created {
						p.created++
					}
					p.ok++
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	created := 0
	for _, p := range producers {
		created += p.created
	}
	signals.WaitWritten(t, time.Minute, "s", "sent", keys)
	var rows, distinct, inHistory int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT count(*), count(DISTINCT dedup_key), count(*) FILTER (WHERE phase = 'sent') FROM "+
		b.Outbox.Schema()+".messages_all").Scan(&rows, &distinct, &inHistory); err != nil {
		t.Fatal(err)
	}
	if rows != keys || distinct != keys || created != keys {
		t.Fatalf("%d rows of %d distinct keys, %d enqueues reported created; want %d of each", rows, distinct, created, keys)
	}
	if n := len(rec.Snapshot()); n != keys {
		t.Fatalf("%d deliveries of %d keys", n, keys)
	}
	if hot, _ := rowsOf(t, b, "key-0"); hot != 0 || inHistory != keys {
		t.Fatalf("%d delivered rows in history; the hot table still holds key-0 %d times", inHistory, hot)
	}
}

// enqueueRetrying enqueues key through path, in a REPEATABLE READ
// transaction when repeatable, retrying the serialization failures such a
// transaction gets when a concurrent one took the key first.
func enqueueRetrying(b coretest.Bundle, path enqueuePath, repeatable bool, key string) (outboxd.EnqueueResult, error) {
	if !repeatable {
		return path.enqueue(b.Ctx, b, b.Pool, key)
	}
	for {
		var res outboxd.EnqueueResult
		err := pgx.BeginTxFunc(b.Ctx, b.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			var err error
			res, err = path.enqueue(b.Ctx, b, tx, key)
			return err
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40001" {
			continue
		}
		return res, err
	}
}
