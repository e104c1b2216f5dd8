// Package migrate creates and upgrades an outbox's schema: versioned SQL
// files embedded in the binary, applied in order, each recorded in the
// schema's ledger. A program gets its [Migrator] from its front door,
// outboxd.Outbox.Migrator.
package migrate

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/internal/pgerr"
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

// checksum is the hex sha256 of the migration's SQL, as the ledger records
// it.
func (mg migration) checksum() string {
	sum := sha256.Sum256([]byte(mg.SQL))
	return hex.EncodeToString(sum[:])
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

// checksumVersion is the migration that gives the ledger its checksum
// column: the checksums of the migrations a run applies are recorded once
// it is applied (a run stopping before it, MigrateTo, records none).
const checksumVersion = 15

// Library is the actor Migrate records: an application migrating its
// outbox through this package.
var Library = audit.Actor{Name: "migrate.Migrate", Role: "admin", Source: "library"}

// New returns the Migrator of q's outbox schema, recording its runs in
// trail. Programs get theirs from the front door (outboxd.Outbox.Migrator),
// which makes the one store and trail its engine shares.
func New(q *store.Queries, trail *audit.Trail) *Migrator {
	return &Migrator{q: q, trail: trail}
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

// deadlockAttempts is how often a migration run that PostgreSQL chose as a
// deadlock's victim is tried: its DDL takes table locks in its own order
// while producers' enqueues take row locks on the same tables in theirs
// (message keys, then messages), so under load a run can lose; it was
// rolled back whole and is simply run again.
const deadlockAttempts = 5

// migrateUpTo applies the pending migrations up to version as actor,
// again when the run was a deadlock's victim (see deadlockAttempts).
func (m *Migrator) migrateUpTo(ctx context.Context, db Beginner, actor audit.Actor, version int) ([]int, error) {
	for attempt := 1; ; attempt++ {
		applied, err := m.migrateOnce(ctx, db, actor, version)
		if err == nil || !pgerr.IsDeadlock(err) || attempt == deadlockAttempts {
			return applied, err
		}
	}
}

// migrateOnce is one run of migrateUpTo, in one transaction.
func (m *Migrator) migrateOnce(ctx context.Context, db Beginner, actor audit.Actor, version int) ([]int, error) {
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
		locked := false
		for _, mg := range all {
			if done[mg.Version] || mg.Version > version {
				continue
			}
			if !locked {
				if err := m.q.LockQueueTables(ctx, tx); err != nil {
					return fmt.Errorf("lock the queue's tables: %w", err)
				}
				locked = true
			}
			if _, err := tx.Exec(ctx, mg.SQL); err != nil {
				return fmt.Errorf("apply migration %03d_%s: %w", mg.Version, mg.Name, err)
			}
			if err := m.q.MigrationsRecord(ctx, tx, mg.Version, mg.Name); err != nil {
				return fmt.Errorf("record migration %03d: %w", mg.Version, err)
			}
			applied = append(applied, mg.Version)
		}
		if done[checksumVersion] || slices.Contains(applied, checksumVersion) {
			if err := m.recordChecksums(ctx, tx, all, applied); err != nil {
				return err
			}
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
func (m *Migrator) Pending(ctx context.Context, db store.DBTX) ([]int, error) {
	status, err := m.Status(ctx, db)
	if err != nil {
		return nil, err
	}
	var pending []int
	for _, mg := range status {
		if !mg.Applied {
			pending = append(pending, mg.Version)
		}
	}
	return pending, nil
}

// recordChecksums records the checksums of the migrations applied in this
// run, once the last of them (migration 015's column among them) is in.
func (m *Migrator) recordChecksums(ctx context.Context, tx pgx.Tx, all []migration, applied []int) error {
	if len(applied) == 0 {
		return nil
	}
	sums := make([]string, len(applied))
	for i, v := range applied {
		for _, mg := range all {
			if mg.Version == v {
				sums[i] = mg.checksum()
			}
		}
	}
	if err := m.q.MigrationsRecordChecksums(ctx, tx, applied, sums); err != nil {
		return fmt.Errorf("record migration checksums: %w", err)
	}
	return nil
}

// Migration is one migration as the schema has it: the embedded file, and
// whether and when it was applied with which checksum.
type Migration struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// Checksum is the hex sha256 of the migration's SQL in this binary.
	Checksum string `json:"checksum"`
	Applied  bool   `json:"applied"`
	// AppliedAt is when it was applied; nil while pending.
	AppliedAt *time.Time `json:"applied_at"`
	// AppliedChecksum is the checksum the ledger recorded; "" while
	// pending, and for migrations applied before the ledger recorded
	// checksums (migration 015).
	AppliedChecksum string `json:"applied_checksum"`
	// Changed says the recorded checksum is not this binary's: the file
	// was edited after it was applied (a development build, or a
	// different build of the same version).
	Changed bool `json:"changed"`
	// Unknown says the ledger has the version but this binary has no such
	// file: the schema was migrated by a newer outboxd.
	Unknown bool `json:"unknown"`
}

// Status lists every migration of this binary and of the ledger, in
// order: applied (when, with which checksum) or pending. A schema that
// does not exist has every migration pending.
func (m *Migrator) Status(ctx context.Context, db store.DBTX) ([]Migration, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	exists, err := m.q.MigrationsLedgerExists(ctx, db, m.q.Schema+".schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("outbox: check migrations: %w", err)
	}
	var ledger []store.MigrationsLedgerRow
	if exists {
		if ledger, err = m.q.MigrationsLedger(ctx, db); err != nil {
			return nil, fmt.Errorf("outbox: read migration ledger of schema %s: %w", m.q.Schema, err)
		}
	}
	byVersion := map[int]*Migration{}
	var out []Migration
	for _, mg := range all {
		out = append(out, Migration{Version: mg.Version, Name: mg.Name, Checksum: mg.checksum()})
	}
	for i := range out {
		byVersion[out[i].Version] = &out[i]
	}
	for _, row := range ledger {
		st, ok := byVersion[row.Version]
		if !ok {
			out = append(out, Migration{Version: row.Version, Name: row.Name, Unknown: true})
			st = &out[len(out)-1]
		}
		at := row.AppliedAt
		st.Applied, st.AppliedAt = true, &at
		if row.Checksum != nil {
			st.AppliedChecksum = *row.Checksum
			st.Changed = !st.Unknown && st.AppliedChecksum != st.Checksum
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Script is the SQL Migrate would run on a schema, statement by statement
// in order: preparing the schema and its ledger, then each pending
// migration. Migrate runs it in one transaction, under an advisory lock.
type Script struct {
	// Prepare creates the schema and the ledger if they do not exist, and
	// points unqualified names at the schema.
	Prepare string
	// Migrations are the pending migrations' SQL, in order.
	Migrations []PendingMigration
}

// PendingMigration is one migration Migrate would apply.
type PendingMigration struct {
	Version  int
	Name     string
	Checksum string
	SQL      string
}

// PendingScript returns the SQL Migrate would run on the schema in db now,
// running none of it.
func (m *Migrator) PendingScript(ctx context.Context, db store.DBTX) (Script, error) {
	all, err := migrations()
	if err != nil {
		return Script{}, err
	}
	pending, err := m.Pending(ctx, db)
	if err != nil {
		return Script{}, err
	}
	texts := m.q.Texts()
	s := Script{Prepare: strings.TrimSpace(texts.MigrationsPrepare) + ";\n" + strings.TrimSpace(texts.SetSearchPath) + ";"}
	for _, mg := range all {
		if slices.Contains(pending, mg.Version) {
			s.Migrations = append(s.Migrations, PendingMigration{Version: mg.Version, Name: mg.Name, Checksum: mg.checksum(), SQL: mg.SQL})
		}
	}
	return s, nil
}

func (m *Migrator) appliedVersions(ctx context.Context, db store.DBTX) (map[int]bool, error) {
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
