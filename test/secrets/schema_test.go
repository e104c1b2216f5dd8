package secrets_test

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestHostileSchemaNamesRefused: the schema name is the one piece of
// configuration that reaches SQL text; outboxd.New refuses anything but a
// plain lower-case identifier, and the error quotes it safely; the name is
// quoted in the statements, so a keyword works as a schema.
// (Mutations, each failing this test: a schemaNamePattern matching
// anything; New using the name unquoted.)
func TestHostileSchemaNamesRefused(t *testing.T) {
	t.Parallel()
	hostile := []string{
		`outbox; DROP TABLE users; --`, `outbox"; DROP SCHEMA public CASCADE; --`,
		`a.b`, `"quoted"`, `Outbox`, `1outbox`, `out box`, `out-box`, `outbox$1`,
		`pg_catalog" --`, "outbox\x00", "outbox\n", `ünïcode`, strings.Repeat("a", 64),
		`outbox' OR '1'='1`, `$$`, `*`, `outbox/*`,
		// Fits an identifier, but its notification channel would not.
		strings.Repeat("a", outboxd.MaxSchemaNameBytes+1),
	}
	for _, name := range hostile {
		if ob, err := outboxd.New(nil, outboxd.Options{Schema: name}); err == nil {
			t.Errorf("outboxd.New(%q) accepted it as schema %q", name, ob.Schema())
		}
	}
	for _, name := range []string{"outbox", "_x", "tenant_42", strings.Repeat("a", outboxd.MaxSchemaNameBytes)} {
		if _, err := outboxd.New(nil, outboxd.Options{Schema: name}); err != nil {
			t.Errorf("outboxd.New(%q): %v", name, err)
		}
	}

	// A valid name can still be a keyword: only quoted is it a schema.
	// In a transaction rolled back at the end, so no schema of this fixed
	// name outlives the test (a concurrent run waits for this one).
	ctx := context.Background()
	ob := testdb.Open(t, "select")
	tx, err := testdb.Pool(t, 2).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := ob.Migrate(ctx, tx); err != nil {
		t.Fatalf("migrate schema %q: %v", ob.Schema(), err)
	}
	if _, err := ob.Enqueue(ctx, tx, outboxd.Message{Sink: "s", DedupKey: "k", Payload: "x"}); err != nil {
		t.Fatalf("enqueue into schema %q: %v", ob.Schema(), err)
	}
}

// TestLongestSchemaNameEnqueues: the longest schema name outboxd.New accepts
// migrates and enqueues. (On fb9f77d a 50-character name migrated and then
// every enqueue failed with "channel name too long".)
func TestLongestSchemaNameEnqueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t, 2)
	name := "z" + strings.Repeat("x", outboxd.MaxSchemaNameBytes-1)
	ob := testdb.Open(t, name)
	t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	if _, err := ob.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "s", DedupKey: "k", Payload: "x"}); err != nil {
		t.Fatalf("enqueue into schema %s: %v", name, err)
	}
}
