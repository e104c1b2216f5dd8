package cmd

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/operator"
)

// Environment variables that name the database, in order of precedence
// after the --database-url flag and before database.url.
var databaseURLEnv = []string{"OUTBOX_DATABASE_URL", "DATABASE_URL"}

// resolveDatabaseURL applies the documented precedence: --database-url,
// OUTBOX_DATABASE_URL, DATABASE_URL, then configured (database.url). An
// empty result leaves the connection to libpq's PG* variables and defaults.
func (a *app) resolveDatabaseURL(configured string) string {
	if a.databaseURL != "" {
		return a.databaseURL
	}
	for _, name := range databaseURLEnv {
		if v, ok := a.io.Env(name); ok && v != "" {
			return v
		}
	}
	return configured
}

// connect loads the configuration and opens a pool on its database. The
// pool connects lazily: an unreachable server shows up on first use.
func (a *app) connect(ctx context.Context) (session, error) {
	cfg, err := a.config()
	if err != nil {
		return session{}, err
	}
	s, err := newSession(cfg)
	if err != nil {
		return session{}, err
	}
	pcfg, err := pgxpool.ParseConfig(a.resolveDatabaseURL(cfg.Database.URL))
	if err != nil {
		return session{}, badInputf("database URL: %w", err)
	}
	// pgxpool honours PG* variables through ParseConfig, so an empty URL
	// means libpq's defaults, as documented.
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return session{}, fmt.Errorf("open database pool: %w", err)
	}
	return s, nil
}

// session is what a database command works with: the configuration, a
// pool, and the outbox of its schema for each audience.
type session struct {
	cfg  *config.Config
	pool *pgxpool.Pool
	ob   *core.Outbox       // enqueue and publish
	ops  *operator.Operator // stats, dead letters, lookups, pauses
	mig  *migrate.Migrator  // migrate, readiness
}

// newSession builds the outboxes of cfg's schema. It opens nothing.
func newSession(cfg *config.Config) (session, error) {
	s := session{cfg: cfg}
	schema := cfg.Database.Schema
	if err := s.countWith(nil); err != nil {
		return session{}, &config.Error{File: cfg.File, Problems: []string{"database.schema: " + err.Error()}}
	}
	// The schema is valid: the others accept it as core did.
	var err error
	if s.ops, err = operator.New(schema); err != nil {
		return session{}, err
	}
	if s.mig, err = migrate.New(schema); err != nil {
		return session{}, err
	}
	return s, nil
}

// countWith makes s's outbox count its enqueues with mp: the Outbox takes
// its meter provider when it is made.
func (s *session) countWith(mp metric.MeterProvider) error {
	ob, err := core.New(core.Options{Schema: s.cfg.Database.Schema, MeterProvider: mp})
	if err != nil {
		return err
	}
	s.ob = ob
	return nil
}

// withDB wraps a command body that needs the database: it connects before
// and closes the pool after.
func (a *app) withDB(run func(cmd *cobra.Command, s session) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		s, err := a.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer s.pool.Close()
		return run(cmd, s)
	}
}
