// Package testdb gives each test its own outbox schema on the real PostgreSQL
// server, so test packages run in parallel without seeing each other's rows.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/store"
)

// DefaultURL is the database tests use when neither TEST_DATABASE_URL nor
// DATABASE_URL is set: the local server with trust auth.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// defaultPoolSize keeps each test's pool small: many tests run at once
// against a server with 100 connections.
const defaultPoolSize = 8

// URL returns the connection string tests use.
func URL() string {
	for _, env := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if u := os.Getenv(env); u != "" {
			return u
		}
	}
	return DefaultURL
}

// Pool opens a pool of at most size connections (0 means a small default),
// closed when the test ends.
func Pool(t testing.TB, size int) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, URL(), size)
}

// poolOn is Pool on the database of url.
func poolOn(t testing.TB, url string, size int) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testdb: parse %s: %v", url, err)
	}
	if size <= 0 {
		size = defaultPoolSize
	}
	cfg.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Outbox is a test's outbox in a schema of its own: the front door, with
// the operator queries and the migrations of that one schema embedded, so
// a test can enqueue, inspect and migrate through one value.
type Outbox struct {
	*outboxd.Outbox
	*operator.Operator
	*migrate.Migrator
}

// Schema returns the outbox's schema (each embedded part knows it too).
func (o *Outbox) Schema() string { return o.Outbox.Schema() }

// Audit returns the outbox's audit trail (the operator's is the same one).
func (o *Outbox) Audit() *audit.Trail { return o.Outbox.Audit() }

// Open returns the Outbox of an existing schema, made without a pool: it
// produces, operates and migrates through the handles its calls are given
// (a test runs its relays with testrelay).
func Open(t testing.TB, schema string) *Outbox {
	t.Helper()
	return open(t, nil, schema)
}

// open returns the Outbox of schema on pool.
func open(t testing.TB, pool *pgxpool.Pool, schema string) *Outbox {
	t.Helper()
	ob, err := outboxd.New(pool, outboxd.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return &Outbox{Outbox: ob, Operator: ob.Operator(), Migrator: ob.Migrator()}
}

// New creates a fresh, migrated outbox in a schema of its own (dropped when
// the test ends) and returns it with a pool.
func New(t testing.TB) (*pgxpool.Pool, *Outbox) {
	t.Helper()
	pool := Pool(t, 0)
	return pool, NewSchema(t, pool)
}

// NewSchema creates a fresh, migrated outbox schema through pool, dropped
// when the test ends.
func NewSchema(t testing.TB, pool *pgxpool.Pool) *Outbox {
	t.Helper()
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	ob := open(t, pool, "test_"+hex.EncodeToString(suffix))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := ob.Migrate(ctx, pool); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+ob.Schema()+" CASCADE"); err != nil {
			t.Errorf("testdb: drop schema %s: %v", ob.Schema(), err)
		}
	})
	return ob
}

// StatusCounts returns the number of ob's rows per status, for one sink
// or, with sink "", for all. It reads the table directly, not through the
// operator's Stats, so tests check the engine against the rows themselves:
// messages, and the delivered ones in messages_history (migration 013).
func StatusCounts(t testing.TB, pool *pgxpool.Pool, ob *Outbox, sink string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT status, count(*) FROM (SELECT sink, status FROM "+ob.Schema()+".messages UNION ALL SELECT sink, 'sent' FROM "+
			ob.Schema()+".messages_history) m WHERE $1 = '' OR sink = $1 GROUP BY status", sink)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var status string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		out[status] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// DeadRows inserts dead rows of sink with the given last errors and
// returns their ids.
func DeadRows(t testing.TB, pool *pgxpool.Pool, ob *Outbox, sink string, errs ...string) []int64 {
	t.Helper()
	var ids []int64
	for i, e := range errs {
		var id int64
		err := pool.QueryRow(context.Background(), "INSERT INTO "+ob.Schema()+`.messages (sink, dedup_key, payload, status, attempts, last_error)
			VALUES ($1, $2, '{"n": 1}', 'dead', 2, $3) RETURNING id`, sink, fmt.Sprintf("dead-%s-%d", sink, i), e).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// dropDatabaseTimeout bounds the drop of a database of DatabaseWithIsolation.
const dropDatabaseTimeout = 3 * time.Minute

// DatabaseWithIsolation creates a database of the test's own on the test
// server whose default_transaction_isolation is isolation ("repeatable
// read", "serializable"), dropped when the test ends, and returns its URL.
// Tests of behaviour under a database's defaults use it: the shared test
// database's settings are never changed.
func DatabaseWithIsolation(t testing.TB, isolation string) string {
	t.Helper()
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := "test_iso_" + hex.EncodeToString(suffix)
	admin := Pool(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testdb: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dropDatabaseTimeout)
		defer cancel()
		// DROP DATABASE waits for a checkpoint of the whole server, which
		// a loaded CI machine took over a minute to finish: a database
		// left behind is only disk, and says nothing of the test, so it
		// is logged rather than failed.
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testdb: drop database %s (left behind): %v", name, err)
		}
	})
	set := "ALTER DATABASE " + name + " SET default_transaction_isolation = '" + strings.ReplaceAll(isolation, "'", "''") + "'"
	if _, err := admin.Exec(ctx, set); err != nil {
		t.Fatalf("testdb: set %s's default isolation: %v", name, err)
	}
	u, err := url.Parse(URL())
	if err != nil {
		t.Fatalf("testdb: parse %s: %v", URL(), err)
	}
	u.Path = "/" + name
	return u.String()
}

// StricterIsolations are the default_transaction_isolation values above
// PostgreSQL's default, READ COMMITTED, under which a transaction's snapshot
// is taken once, by its first statement.
var StricterIsolations = []string{"repeatable read", "serializable"}

// UnderStricterIsolations runs test as a parallel subtest per isolation of
// StricterIsolations, each with a pool of at most size connections on a
// database of its own with that default (PoolWithIsolation) and a context
// of two minutes.
func UnderStricterIsolations(t *testing.T, size int, test func(t *testing.T, ctx context.Context, pool *pgxpool.Pool, isolation string)) {
	t.Helper()
	for _, isolation := range StricterIsolations {
		t.Run(isolation, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), isolationTestTimeout)
			defer cancel()
			test(t, ctx, PoolWithIsolation(t, isolation, size), isolation)
		})
	}
}

// isolationTestTimeout bounds each of UnderStricterIsolations' subtests.
const isolationTestTimeout = 2 * time.Minute

// PoolWithIsolation opens a pool of at most size connections on a database
// of the test's own whose default isolation is isolation (see
// DatabaseWithIsolation), and checks that its sessions get it.
func PoolWithIsolation(t testing.TB, isolation string, size int) *pgxpool.Pool {
	t.Helper()
	pool := poolOn(t, DatabaseWithIsolation(t, isolation), size)
	var level string
	if err := pool.QueryRow(context.Background(), "SHOW transaction_isolation").Scan(&level); err != nil || level != isolation {
		t.Fatalf("testdb: the database's isolation is %q (%v), want %q", level, err, isolation)
	}
	return pool
}

// HoldMigrationLock begins a transaction on pool that holds the migration
// lock of schema, so a test can make migrations queue behind it; it is
// rolled back when the test ends unless the test commits it first.
func HoldMigrationLock(ctx context.Context, t testing.TB, pool *pgxpool.Pool, schema string) pgx.Tx {
	t.Helper()
	q, err := store.New(schema)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	if err := q.LockTransaction(ctx, holder, store.AdvisoryLockNamespace, q.Schema, store.LockKeyMigrate); err != nil {
		t.Fatalf("testdb: take the migration lock of %s: %v", schema, err)
	}
	return holder
}

// DropSchemaUnderLoad drops schema and all it holds while relays still
// run statements on it. The drop locks every table of the schema in one
// order and the relays' statements lock some of them in theirs, so
// PostgreSQL may pick the drop as a deadlock's victim; it is then tried
// again, up to dropAttempts times.
func DropSchemaUnderLoad(ctx context.Context, t testing.TB, pool *pgxpool.Pool, schema string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		_, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		var pgErr *pgconn.PgError
		if err == nil {
			return
		}
		if !errors.As(err, &pgErr) || pgErr.Code != sqlstateDeadlockDetected || attempt == dropAttempts {
			t.Fatalf("testdb: drop schema %s (attempt %d): %v", schema, attempt, err)
		}
	}
}

// dropAttempts bounds DropSchemaUnderLoad's retries: a deadlock needs the
// relays' statements to interleave with the drop's locks, which is rare,
// and five in a row would be a bug rather than bad luck.
const dropAttempts = 5

// sqlstateDeadlockDetected is PostgreSQL's deadlock_detected.
const sqlstateDeadlockDetected = "40P01"

// WaitForLockWaiters waits, until ctx ends, for n sessions of pool's
// database to wait for a lock (any heavyweight lock: advisory, row,
// relation), so a test knows its transactions queue behind a lock it holds
// before it lets them go.
func WaitForLockWaiters(ctx context.Context, t testing.TB, pool *pgxpool.Pool, n int) {
	t.Helper()
	for {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatalf("testdb: count the sessions waiting for a lock: %v", err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testdb: %d of %d sessions wait for a lock when the test's time is up", waiting, n)
		case <-time.After(lockPollInterval):
		}
	}
}

// lockPollInterval is how often WaitForLockWaiters looks.
const lockPollInterval = 10 * time.Millisecond

// Actor is who the tests' operator actions are done for.
var Actor = audit.Actor{Name: "test", Role: "admin", Source: "test"}
