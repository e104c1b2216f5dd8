package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
)

func (a *app) configCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Show or check the configuration",
	}
	c.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration: every key, defaults, ${VAR} expansion and OUTBOX_* overrides applied, secrets redacted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config(config.Everything)
			if err != nil {
				return err
			}
			shown := *cfg
			shown.Database.URL = a.resolveDatabaseURL(cfg.Database.URL)
			return shown.WriteRedacted(cmd.OutOrStdout())
		},
	}, &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration, including every sink's options and every route's templates; exit 0, or print every problem and exit 2",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config(config.Everything)
			if err != nil {
				return err
			}
			if err := serveProblems(cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configuration %s is valid (%d sinks, %d routes)\n", config.DescribeFile(cfg.File), len(cfg.Sinks), len(cfg.Routes))
			return nil
		},
	})
	return c
}
