package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the outbox schema and apply the configuration's routes; safe to run from several pods at once",
		Args:  cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			applied, err := s.mig.MigrateAs(cmd.Context(), s.pool, a.actor())
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "schema %s is up to date\n", s.mig.Schema())
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "schema %s: applied migrations %v\n", s.mig.Schema(), applied)
			}
			if !s.cfg.HasRoutes() {
				return nil
			}
			return applyRoutes(cmd.Context(), cmd.OutOrStdout(), s, a.actor())
		}),
	}
}
