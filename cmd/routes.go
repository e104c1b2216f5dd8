package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/server/telemetry"
)

func (a *app) routesCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "routes",
		Short: "Store the configuration's routes in the database, where publish() reads them, or try an event on them",
		Example: `  outboxd routes apply
  outboxd routes test --type order.created --data '{"id": 42}'`,
	}
	c.AddCommand(a.routesTestCommand(), &cobra.Command{
		Use:   "apply",
		Short: "Apply the configuration's routes; applying the routes already active changes nothing",
		Long: `Make the configuration's routes (checked when it loads: every template
rendered with a sample event) the routes that publish() uses, as a new
version unless the same routes were applied before. outboxd migrate does
this too when the configuration has routes. Safe to run from several pods
at once. It needs only the database: the sinks' options and their secrets
are not read (templates are checked against the sink types' shapes).`,
		Example: `  DATABASE_URL=postgres://outboxd@db/app outboxd routes apply`,
		Args:    cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			if !s.cfg.HasRoutes() {
				return badInputf("routes apply: the configuration has no routes (add a routes: block)")
			}
			return applyRoutes(cmd.Context(), cmd.OutOrStdout(), s, a.actor())
		}),
	})
	return c
}

// applyRoutes applies the configuration's routes as actor's, printing
// what it did.
func applyRoutes(ctx context.Context, out io.Writer, s session, actor audit.Actor) error {
	applied, err := routing.Apply(ctx, s.pool, s.ob.Schema(), s.cfg.RouteTable(), actor)
	if err != nil {
		return err
	}
	if applied.Changed {
		fmt.Fprintf(out, "routes applied: version %d (%d routes)\n", applied.Version, len(s.cfg.RouteTable().Routes()))
	} else {
		fmt.Fprintf(out, "routes unchanged: version %d is active\n", applied.Version)
	}
	return nil
}

// serveActor is who applies the routes when serve finds none applied.
var serveActor = audit.Actor{Name: "outboxd serve", Role: string(access.RoleAdmin), Source: "serve"}

// checkAppliedRoutes, as actor (who applies them, when it does), compares the routes this relay renders with to the
// ones applied to the database, which route every publish. When none were
// ever applied it applies its own (a first start without outboxd migrate:
// no other version exists that a rolling deploy could flip back); when
// others are applied it warns, since the two should match once a deploy
// is done.
func checkAppliedRoutes(ctx context.Context, s session, log *slog.Logger, actor audit.Actor) {
	version, digest, err := routing.Active(ctx, s.pool, s.ob.Schema())
	switch {
	case err != nil:
		log.Warn("could not read the routes applied to the database", telemetry.ErrAttr(err))
	case version == 0 && s.cfg.HasRoutes():
		applied, err := routing.Apply(ctx, s.pool, s.ob.Schema(), s.cfg.RouteTable(), actor)
		if err != nil {
			log.Warn("no routes are applied to the database, and applying this configuration's failed: publishing fails until outboxd routes apply runs", telemetry.ErrAttr(err))
			return
		}
		log.Info("applied this configuration's routes: none were applied yet", "version", applied.Version)
	case version != 0 && digest != s.cfg.RouteTable().Digest():
		log.Warn("the routes of this configuration are not the ones applied to the database: events are routed by the database's (run outboxd routes apply) and rendered with the templates of the version they were published under",
			"applied_version", version)
	}
}
