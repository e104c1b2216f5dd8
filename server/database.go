package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/telemetry"
)

// startupRetryInitial and startupRetryMax shape the backoff while the
// database is unreachable or unmigrated at start.
const (
	startupRetryInitial = 500 * time.Millisecond
	startupRetryMax     = 30 * time.Second
)

// waitForDatabase retries, with capped exponential backoff, until the
// database answers and its outbox schema is migrated, logging each failed
// check; /readyz fails meanwhile.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, m *migrate.Migrator, log *slog.Logger) error {
	backoff := retry.WithCappedDuration(startupRetryMax, retry.WithJitterPercent(10, retry.NewExponential(startupRetryInitial)))
	attempt := 0
	return retry.Do(ctx, backoff, func(ctx context.Context) error {
		attempt++
		cctx, cancel := context.WithTimeout(ctx, api.ReadinessTimeout)
		defer cancel()
		nr := api.Ready(cctx, pool, m)
		if nr == nil {
			if attempt > 1 {
				log.Info("database ready", "attempts", attempt)
			}
			return nil
		}
		log.Warn("waiting for the database; retrying with backoff", "attempt", attempt, telemetry.ErrAttr(nr))
		return retry.RetryableError(nr)
	})
}

// serveActor is who applies the routes when serve finds none applied.
var serveActor = audit.Actor{Name: "outboxd serve", Role: string(access.RoleAdmin), Source: "serve"}

// checkAppliedRoutes, as actor (who applies them, when it does), compares
// the routes cfg renders with to the ones applied to the database
// (routes, through pool), which route every publish. When none were ever applied it
// applies cfg's (a first start without outboxd migrate: no other version
// exists that a rolling deploy could flip back); when others are applied
// it warns, since the two should match once a deploy is done.
func checkAppliedRoutes(ctx context.Context, pool *pgxpool.Pool, routes *routing.Versions, cfg *config.Config, log *slog.Logger, actor audit.Actor) {
	version, digest, err := routes.Active(ctx, pool)
	switch {
	case err != nil:
		log.Warn("could not read the routes applied to the database", telemetry.ErrAttr(err))
	case version == 0 && cfg.HasRoutes():
		applied, err := routes.Apply(ctx, pool, cfg.RouteTable(), actor)
		if err != nil {
			log.Warn("no routes are applied to the database, and applying this configuration's failed: publishing fails until outboxd routes apply runs", telemetry.ErrAttr(err))
			return
		}
		log.Info("applied this configuration's routes: none were applied yet", "version", applied.Version)
	case version != 0 && digest != cfg.RouteTable().Digest():
		log.Warn("the routes of this configuration are not the ones applied to the database: events are routed by the database's (run outboxd routes apply) and rendered with the templates of the version they were published under",
			"applied_version", version)
	}
}
