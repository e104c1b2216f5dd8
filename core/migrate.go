package core

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// advisoryLockNamespace is the first key of every two-argument advisory lock
// outboxd takes ("obx" in ASCII). Applications using the one-argument form,
// or other namespaces, can never collide with it.
const advisoryLockNamespace int32 = 0x6f6278

// Second keys within advisoryLockNamespace; each is combined with a hash of
// the schema name so independent outboxes do not contend.
const (
	lockKeyMigrate     = 1
	lockKeyMaintenance = 2
)

// migration is one embedded, versioned schema change.
type migration struct {
	Version int
	Name    string
	SQL     string
}

// migrations returns the embedded migrations in the order they apply.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("outbox: read embedded migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		version, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(version)
		if !ok || err != nil {
			return nil, fmt.Errorf("outbox: migration file %q is not named NNN_name.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("outbox: read migration %s: %w", e.Name(), err)
		}
		out = append(out, migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Beginner is anything that can start a transaction: a pool or a connection.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate creates the outbox schema if needed and applies the migrations it
// has not recorded yet, in one transaction. Concurrent calls from several
// pods are safe: they queue on an advisory lock and the later ones find
// nothing left to do. It returns the versions it applied.
func (o *Outbox) Migrate(ctx context.Context, db Beginner) ([]int, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, o.sql.lockTransaction, advisoryLockNamespace, o.schema, lockKeyMigrate); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, o.sql.migrationsPrepare); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		done, err := o.appliedVersions(ctx, tx)
		if err != nil {
			return err
		}
		// Unqualified names in migration files resolve to our schema.
		if _, err := tx.Exec(ctx, o.sql.setSearchPath); err != nil {
			return fmt.Errorf("set search_path: %w", err)
		}
		for _, m := range all {
			if done[m.Version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply migration %03d_%s: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, o.sql.migrationsRecord, m.Version, m.Name); err != nil {
				return fmt.Errorf("record migration %03d: %w", m.Version, err)
			}
			applied = append(applied, m.Version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: migrate schema %s: %w", o.schema, err)
	}
	return applied, nil
}

// PendingMigrations returns the versions not yet applied; empty means the
// schema is current. A missing schema counts as every migration pending.
func (o *Outbox) PendingMigrations(ctx context.Context, db DBTX) ([]int, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := db.QueryRow(ctx, o.sql.migrationsLedgerExists, o.schema+".schema_migrations").Scan(&exists); err != nil {
		return nil, fmt.Errorf("outbox: check migrations: %w", err)
	}
	done := map[int]bool{}
	if exists {
		if done, err = o.appliedVersions(ctx, db); err != nil {
			return nil, err
		}
	}
	var pending []int
	for _, m := range all {
		if !done[m.Version] {
			pending = append(pending, m.Version)
		}
	}
	return pending, nil
}

func (o *Outbox) appliedVersions(ctx context.Context, db DBTX) (map[int]bool, error) {
	rows, err := db.Query(ctx, o.sql.migrationsApplied)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	done := make(map[int]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}
