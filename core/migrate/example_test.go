package migrate_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// ExampleMigrator_MigrateTo builds the schema a release before migration
// 013 (delivered history), then finishes the upgrade.
func ExampleMigrator_MigrateTo() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.URL())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS example_migrate_to CASCADE") //nolint:errcheck // best effort
	ob, err := outboxd.New(pool, outboxd.Options{Schema: "example_migrate_to"})
	if err != nil {
		panic(err)
	}
	var m *migrate.Migrator = ob.Migrator()
	if _, err := m.MigrateTo(ctx, pool, 12); err != nil {
		panic(err)
	}
	pending, err := m.Pending(ctx, pool)
	if err != nil {
		panic(err)
	}
	fmt.Println("pending:", pending[0])
	applied, err := m.Migrate(ctx, pool)
	if err != nil {
		panic(err)
	}
	fmt.Println("applied from:", applied[0])
	// Output:
	// pending: 13
	// applied from: 13
}
