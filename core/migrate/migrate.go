// Package migrate creates and upgrades an outbox's schema: versioned SQL
// files embedded in the binary, applied in order, each recorded in the
// schema's ledger.
package migrate

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

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

// Beginner is anything that can start a transaction: a pool, a connection,
// or a transaction (the migrations then run in a savepoint of it, under its
// isolation level).
type Beginner = store.Beginner

// Migrator applies the migrations of one outbox schema.
type Migrator struct {
	q     *store.Queries
	trail *audit.Trail
}

// auditVersion is the migration that creates the audit trail: a run that
// finds it applied, or applies it, records itself there.
const auditVersion = 14

// Library is the actor Migrate records: an application migrating its
// outbox through this package.
var Library = audit.Actor{Name: "migrate.Migrate", Role: "admin", Source: "library"}

// New returns the Migrator of the outbox in schema ("" means
// core.DefaultSchema).
func New(schema string) (*Migrator, error) {
	if schema == "" {
		schema = core.DefaultSchema
	}
	q, err := store.New(schema)
	if err != nil {
		return nil, err
	}
	trail, err := audit.New(schema)
	if err != nil {
		return nil, err
	}
	return &Migrator{q: q, trail: trail}, nil
}

// Schema returns the PostgreSQL schema the migrations apply to.
func (m *Migrator) Schema() string { return m.q.Schema }

// Migrate creates the outbox schema if needed and applies the migrations it
// has not recorded yet, in one transaction. Concurrent calls from several
// pods are safe: they queue on an advisory lock and the later ones find
// nothing left to do, whatever the default transaction isolation (the
// transaction is READ COMMITTED, so a run that waited for the lock sees what
// the previous holder committed). It returns the versions it applied. A run
// that applies any is recorded in the audit trail as Library's; see
// MigrateAs.
func (m *Migrator) Migrate(ctx context.Context, db Beginner) ([]int, error) {
	return m.MigrateAs(ctx, db, Library)
}

// MigrateAs is Migrate done by actor: a run that applies migrations
// records them (once the audit trail's migration is among the applied
// ones) in the audit trail, in the transaction that applies them and
// writes the ledger.
func (m *Migrator) MigrateAs(ctx context.Context, db Beginner, actor audit.Actor) ([]int, error) {
	return m.migrateUpTo(ctx, db, actor, math.MaxInt)
}

// MigrateTo is Migrate stopping after migration version: a staged upgrade
// applies the migrations up to the one it has rehearsed (or an upgrade
// test builds the schema a release before). Versions above it stay
// pending; a later Migrate applies them.
func (m *Migrator) MigrateTo(ctx context.Context, db Beginner, version int) ([]int, error) {
	return m.migrateUpTo(ctx, db, Library, version)
}

// migrateUpTo applies the pending migrations up to version as actor.
func (m *Migrator) migrateUpTo(ctx context.Context, db Beginner, actor audit.Actor, version int) ([]int, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	err = store.ReadCommitted(ctx, db, func(tx pgx.Tx) error {
		if err := m.q.LockTransaction(ctx, tx, store.AdvisoryLockNamespace, m.q.Schema, store.LockKeyMigrate); err != nil {
			return fmt.Errorf("take migration lock: %w", err)
		}
		if err := m.q.MigrationsPrepare(ctx, tx); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		done, err := m.appliedVersions(ctx, tx)
		if err != nil {
			return err
		}
		// Unqualified names in migration files resolve to our schema.
		if err := m.q.SetSearchPath(ctx, tx); err != nil {
			return fmt.Errorf("set search_path: %w", err)
		}
		for _, mg := range all {
			if done[mg.Version] || mg.Version > version {
				continue
			}
			if _, err := tx.Exec(ctx, mg.SQL); err != nil {
				return fmt.Errorf("apply migration %03d_%s: %w", mg.Version, mg.Name, err)
			}
			if err := m.q.MigrationsRecord(ctx, tx, mg.Version, mg.Name); err != nil {
				return fmt.Errorf("record migration %03d: %w", mg.Version, err)
			}
			applied = append(applied, mg.Version)
		}
		if len(applied) == 0 || !(done[auditVersion] || slices.Contains(applied, auditVersion)) {
			return nil
		}
		return m.trail.Write(ctx, tx, actor, audit.Record{Action: audit.ActionMigrate, Count: int64(len(applied)),
			Detail: map[string]any{"schema": m.q.Schema, "versions": applied}})
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: migrate schema %s: %w", m.q.Schema, err)
	}
	// Constraints are added NOT VALID, which holds the table's exclusive
	// lock for an instant, and validated here, after the commit: a
	// validation scans the table without blocking its reads and writes.
	if err := store.ReadCommitted(ctx, db, func(tx pgx.Tx) error { return m.q.ValidateConstraints(ctx, tx) }); err != nil {
		return applied, fmt.Errorf("outbox: migrate schema %s: validate constraints: %w", m.q.Schema, err)
	}
	return applied, nil
}

// Pending returns the versions not yet applied; empty means the
// schema is current. A missing schema counts as every migration pending.
func (m *Migrator) Pending(ctx context.Context, db core.DBTX) ([]int, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	exists, err := m.q.MigrationsLedgerExists(ctx, db, m.q.Schema+".schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("outbox: check migrations: %w", err)
	}
	done := map[int]bool{}
	if exists {
		if done, err = m.appliedVersions(ctx, db); err != nil {
			return nil, err
		}
	}
	var pending []int
	for _, mg := range all {
		if !done[mg.Version] {
			pending = append(pending, mg.Version)
		}
	}
	return pending, nil
}

func (m *Migrator) appliedVersions(ctx context.Context, db core.DBTX) (map[int]bool, error) {
	versions, err := m.q.MigrationsApplied(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	done := make(map[int]bool, len(versions))
	for _, v := range versions {
		done[v] = true
	}
	return done, nil
}
