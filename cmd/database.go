package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/operator"
)

// The variables that name the database, in order of precedence after the
// --database-url flag and before database.url: OUTBOXD_DATABASE_URL (or
// the deprecated OUTBOX_DATABASE_URL, see config.LookupPrefixed), then
// DATABASE_URL.
const (
	databaseURLSuffix = "DATABASE_URL"
	databaseURLEnv    = "DATABASE_URL"
)

// libpqTargetEnv are the libpq variables that, without a URL, name a
// server or a database: with none of them set nothing names a database,
// and the connection would silently go to libpq's default (a local socket,
// the user's own database).
var libpqTargetEnv = []string{"PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE"}

// resolveDatabaseURL applies the documented precedence: --database-url,
// OUTBOXD_DATABASE_URL, DATABASE_URL, then configured (database.url). An
// empty result leaves the connection to libpq's PG* variables.
func (a *app) resolveDatabaseURL(configured string) string {
	if a.databaseURL != "" {
		return a.databaseURL
	}
	if v, warning, ok := config.LookupPrefixed(a.io.Env, databaseURLSuffix); ok && v != "" {
		if warning != "" {
			a.warn(warning)
		}
		return v
	}
	if v, ok := a.io.Env(databaseURLEnv); ok && v != "" {
		return v
	}
	return configured
}

// databaseConfig is the pool configuration of the database the command
// line names, or an error saying where it looked when nothing names one.
func (a *app) databaseConfig(cfg *config.Config) (*pgxpool.Config, error) {
	url := a.resolveDatabaseURL(cfg.Database.URL)
	if url == "" && !slices.ContainsFunc(libpqTargetEnv, func(name string) bool { v, ok := a.io.Env(name); return ok && v != "" }) {
		return nil, badInputf("no database configured: looked at --database-url, $%s (and $%s), $%s, database.url in %s and $%s; set one of them",
			config.EnvOverridePrefix+databaseURLSuffix, config.DeprecatedEnvPrefix+databaseURLSuffix, databaseURLEnv,
			config.DescribeFile(cfg.File), strings.Join(libpqTargetEnv, ", $"))
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, badInputf("database URL: %w", err)
	}
	return pcfg, nil
}

// connect loads the configuration to the extent scope says and opens a
// pool on its database. The pool connects lazily: an unreachable server
// shows up on first use.
func (a *app) connect(ctx context.Context, scope config.Scope) (session, error) {
	cfg, err := a.config(scope)
	if err != nil {
		return session{}, err
	}
	// The schema is checked before the database is looked for.
	s := session{cfg: cfg}
	if err := s.countWith(nil); err != nil {
		return session{}, &config.Error{File: cfg.File, Problems: []string{"database.schema: " + err.Error()}}
	}
	pcfg, err := a.databaseConfig(cfg)
	if err != nil {
		return session{}, err
	}
	s.target = dbTarget{Host: pcfg.ConnConfig.Host, Port: pcfg.ConnConfig.Port, Database: pcfg.ConnConfig.Database,
		User: pcfg.ConnConfig.User, Schema: s.ob.Schema()}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return session{}, fmt.Errorf("open database pool: %w", err)
	}
	// Made again on the pool, which its relays and directory connect with.
	return s, s.countWith(nil)
}

// dbTarget is the database a command works on, as it tells the user: no
// password.
type dbTarget struct {
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Database string `json:"database"`
	User     string `json:"user"`
	Schema   string `json:"schema"`
}

func (t dbTarget) String() string {
	return fmt.Sprintf("schema %s of database %s on %s (user %s)", terminalText(t.Schema), terminalText(t.Database),
		terminalText(net.JoinHostPort(t.Host, strconv.Itoa(int(t.Port)))), terminalText(t.User))
}

// session is what a database command works with: the configuration, a
// pool, and the outbox of its schema, with its parts for each audience.
type session struct {
	cfg    *config.Config
	pool   *pgxpool.Pool
	target dbTarget
	ob     *outboxd.Outbox    // enqueue and publish, relays, routes, destinations
	ops    *operator.Operator // ob's: stats, dead letters, lookups, pauses
	mig    *migrate.Migrator  // ob's: migrate, readiness
}

// countWith makes s's outbox on s's pool, counting its enqueues with mp:
// the Outbox takes its meter provider when it is made.
func (s *session) countWith(mp metric.MeterProvider) error {
	ob, err := outboxd.New(s.pool, outboxd.Options{Schema: s.cfg.Database.Schema, MeterProvider: mp})
	if err != nil {
		return err
	}
	s.ob, s.ops, s.mig = ob, ob.Operator(), ob.Migrator()
	return nil
}

// withDB wraps the body of a command that needs only the database (an
// operator command): it loads the configuration as config.DatabaseOnly,
// so that the sinks' options and their ${VAR}s do not matter, connects
// before and closes the pool after. s.cfg has the sinks' names, types and
// policies, and routes, but no built sinks.
func (a *app) withDB(run func(cmd *cobra.Command, s session) error) func(*cobra.Command, []string) error {
	return a.withSession(config.DatabaseOnly, run)
}

// withConfiguredDB is withDB for the commands that validate everything
// serve would (enqueue, publish): config.Everything.
func (a *app) withConfiguredDB(run func(cmd *cobra.Command, s session) error) func(*cobra.Command, []string) error {
	return a.withSession(config.Everything, run)
}

func (a *app) withSession(scope config.Scope, run func(cmd *cobra.Command, s session) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		s, err := a.connect(cmd.Context(), scope)
		if err != nil {
			return err
		}
		defer s.pool.Close()
		return s.explainUnmigrated(run(cmd, s))
	}
}

// The PostgreSQL errors of a schema outboxd has not migrated (yet, or to
// this version): a table, or the schema itself, does not exist.
const (
	pgUndefinedTable    = "42P01"
	pgInvalidSchemaName = "3F000"
)

// explainUnmigrated turns err, when it says a table or the schema is
// missing, into the fix: running outboxd migrate on this database. Every
// command that works on the database returns its errors through it.
func (s session) explainUnmigrated(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != pgUndefinedTable && pgErr.Code != pgInvalidSchemaName) {
		return err
	}
	return fmt.Errorf("%s is not migrated to this version of outboxd: run `outboxd migrate` (`outboxd migrate status` lists what is pending) (%w)",
		s.target, err)
}
