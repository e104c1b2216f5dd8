package cmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/audit"
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
	applied, err := s.ob.Routes().Apply(ctx, s.pool, s.cfg.RouteTable(), actor)
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
