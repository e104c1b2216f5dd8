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
		Example: `  outboxd config check --config deploy/plugins.yaml
  outboxd config show`,
	}
	c.AddCommand(a.configShowCommand(), &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration, including every sink's options and every route's templates; exit 0, or print every problem and exit 2",
		Long: `Validates the configuration as serve does before it starts: every key, every
${VAR} (set), every sink built from its options, every route's templates
rendered with a sample event, and the rules serve enforces (an http.listen
that is not loopback needs http.token). A configuration it passes is one
serve starts with. A missing or empty configuration file is an error;
--config '' checks the built-in defaults.`,
		Example: `  # in CI, with the production variables' names set to placeholders
  SLACK_BOT_TOKEN=x outboxd config check --config deploy/plugins.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config(config.Everything)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "configuration %s is valid (%d sinks, %d routes)\n", config.DescribeFile(cfg.File), len(cfg.Sinks), len(cfg.Routes))
			return nil
		},
	})
	return c
}

// The formats of config show: the file's own YAML, or JSON for scripts.
const (
	showYAML = "yaml"
	showJSON = "json"
)

func (a *app) configShowCommand() *cobra.Command {
	format := showYAML
	c := &cobra.Command{
		Use:   "show [-o yaml|json]",
		Short: "Print the effective configuration: every key, defaults, ${VAR} expansion and OUTBOXD_* overrides applied, secrets redacted",
		Example: `  outboxd config show
  OUTBOXD_RELAY_BATCH_SIZE=500 outboxd config show | grep batch_size
  outboxd config show -o json | jq .relay.batch_size`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if format != showYAML && format != showJSON {
				return badInputf("-o %q: want %s or %s", format, showYAML, showJSON)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config(config.Everything)
			if err != nil {
				return err
			}
			shown := *cfg
			shown.Database.URL = a.resolveDatabaseURL(cfg.Database.URL)
			if format == showJSON {
				return shown.WriteRedactedJSON(cmd.OutOrStdout())
			}
			return shown.WriteRedacted(cmd.OutOrStdout())
		},
	}
	c.Flags().StringVarP(&format, "output", "o", showYAML, "`format`: yaml or json (the same keys and values, secrets redacted)")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{showYAML, showJSON}, cobra.ShellCompDirectiveNoFileComp))
	return c
}
