package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/store/internal/sqlgen"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestGeneratedIsFresh fails when queries.gen.go is not what sql/*.sql
// generate: a statement or a header edited without running go generate,
// or the generated file edited by hand. (Checked by changing a comment of
// sql/claim.sql without regenerating: the test names the line.)
func TestGeneratedIsFresh(t *testing.T) {
	if err := sqlgen.Check("sql", "queries.gen.go"); err != nil {
		t.Fatal(err)
	}
}

// TestStatementsMatchDatabase prepares every statement against a migrated
// schema: the server accepts each, and the types the headers declare for
// parameters and columns are the server's, so a generated method never
// sends or scans a value of the wrong type. (Checked by declaring
// claim.sql's waiter integer instead of bigint, and by dropping
// thread_root from its returns lines: each fails, naming the file.)
func TestStatementsMatchDatabase(t *testing.T) {
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if err := sqlgen.CheckDatabase(ctx, conn.Conn(), "sql", ob.Schema()); err != nil {
		t.Fatal(err)
	}
}
