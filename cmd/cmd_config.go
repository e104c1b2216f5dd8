package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) configCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Show or check the configuration",
	}
	c.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration (defaults, ${VAR} expansion and OUTBOX_* overrides applied), secrets redacted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			return cfg.WriteRedacted(cmd.OutOrStdout())
		},
	}, &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration, including every sink's options; exit 0 or print the problems and exit 2",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			if _, err := buildSinks(cfg); err != nil {
				return err
			}
			where := cfg.File
			if where == "" {
				where = "built-in defaults"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configuration %s is valid (%d sinks)\n", where, len(cfg.Sinks))
			return nil
		},
	})
	return c
}
