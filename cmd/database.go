package cmd

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core"
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
func (a *app) connect(ctx context.Context) (*config.Config, *pgxpool.Pool, *core.Outbox, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, nil, nil, err
	}
	ob, err := core.New(cfg.Database.Schema)
	if err != nil {
		return nil, nil, nil, &config.Error{File: cfg.File, Problems: []string{"database.schema: " + err.Error()}}
	}
	pcfg, err := pgxpool.ParseConfig(a.resolveDatabaseURL(cfg.Database.URL))
	if err != nil {
		return nil, nil, nil, badInputf("database URL: %w", err)
	}
	// pgxpool honours PG* variables through ParseConfig, so an empty URL
	// means libpq's defaults, as documented.
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open database pool: %w", err)
	}
	return cfg, pool, ob, nil
}

// session is what a database command works with.
type session struct {
	cfg  *config.Config
	pool *pgxpool.Pool
	ob   *core.Outbox
}

// withDB wraps a command body that needs the database: it connects before
// and closes the pool after.
func (a *app) withDB(run func(cmd *cobra.Command, s session) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, pool, ob, err := a.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer pool.Close()
		return run(cmd, session{cfg: cfg, pool: pool, ob: ob})
	}
}
