package cmd

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outboxd/outboxd/config"
)

// eachCommand visits every command of the tree below (and with) c.
func eachCommand(c *cobra.Command, visit func(*cobra.Command)) {
	visit(c)
	for _, sub := range c.Commands() {
		eachCommand(sub, visit)
	}
}

// Every command's help has an Examples: section, and no flag's help shows
// its Go type (`--id int64Slice (default [])`): each names its value.
// Mutation: removing the Example of `dlq list`, the backquoted `id` of
// redrive's --id usage, or finishCommands' blanking of "[]" (or blanking a
// string list's too: "(default )" for destinations create --events) makes
// this fail.
func TestEveryCommandHasExamplesAndNamedFlagValues(t *testing.T) {
	t.Parallel()
	root := (&app{io: streams{Env: config.EnvMap(nil)}}).rootCommand()
	eachCommand(root, func(c *cobra.Command) {
		if c.Name() == "help" || c.Hidden {
			return
		}
		if strings.TrimSpace(c.Example) == "" && !isCompletionShell(c) {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); name != "" && !strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: its help shows the type %q: name the value with backquotes in the usage", c.CommandPath(), f.Name, name)
			}
		})
		for _, empty := range []string{"(default [])", "(default )"} {
			if strings.Contains(c.LocalFlags().FlagUsages(), empty) {
				t.Errorf("%s: a flag's help shows %s", c.CommandPath(), empty)
			}
		}
	})
}

// isCompletionShell is cobra's `completion bash|zsh|fish|powershell`,
// whose parent, `completion`, carries the examples.
func isCompletionShell(c *cobra.Command) bool {
	return c.HasParent() && c.Parent().Name() == "completion"
}
