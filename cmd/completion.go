package cmd

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/server/api"
)

// completionTimeout bounds the database lookups of a shell completion: a
// database that is down must not hang the shell's prompt.
const completionTimeout = 2 * time.Second

// completionConfig loads the configuration for a completion (as
// config.DatabaseOnly: no secrets needed), or nil when it does not load;
// completions run without the commands' pre-run hooks.
func (a *app) completionConfig(cmd *cobra.Command) *config.Config {
	a.configGiven = cmd.Flags().Changed("config")
	cfg, err := a.config(config.DatabaseOnly)
	if err != nil {
		return nil
	}
	return cfg
}

// sinkNames are the configured sinks and, when the database answers in
// time, the sinks it has rows or a pause for.
func (a *app) sinkNames(cmd *cobra.Command) []string {
	cfg := a.completionConfig(cmd)
	if cfg == nil {
		return nil
	}
	names := map[string]bool{}
	for name := range cfg.Sinks {
		names[name] = true
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	if s, err := a.connect(ctx, config.DatabaseOnly); err == nil {
		defer s.pool.Close()
		if snap, err := s.ops.StatsSnapshot(ctx, s.pool); err == nil {
			for name := range snap.Sinks {
				names[name] = true
			}
		}
		if states, err := s.ops.SinkStates(ctx, s.pool); err == nil {
			for name := range states {
				names[name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// completeSinks completes a sink name (a flag's value or a command's one
// argument).
func (a *app) completeSinks(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	return withPrefix(a.sinkNames(cmd), prefix), cobra.ShellCompDirectiveNoFileComp
}

// completeSinkArg completes the NAME of a command that takes one sink.
func (a *app) completeSinkArg(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeSinks(cmd, args, prefix)
}

// completeConfiguredSinkArg completes the NAME of a command that takes one
// configured sink (sinks test).
func (a *app) completeConfiguredSinkArg(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	cfg := a.completionConfig(cmd)
	if len(args) > 0 || cfg == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(slices.Sorted(maps.Keys(cfg.Sinks)), prefix), cobra.ShellCompDirectiveNoFileComp
}

// completeRoutes completes a route name of the configuration.
func (a *app) completeRoutes(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	cfg := a.completionConfig(cmd)
	if cfg == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(cfg.RouteTable().Routes(), prefix), cobra.ShellCompDirectiveNoFileComp
}

// completeStatuses completes a message status.
func completeStatuses(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, s := range api.MessageStatuses() {
		out = append(out, string(s))
	}
	return withPrefix(out, prefix), cobra.ShellCompDirectiveNoFileComp
}

func withPrefix(list []string, prefix string) []string {
	return slices.DeleteFunc(list, func(s string) bool { return !strings.HasPrefix(s, prefix) })
}
