package cmd

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/api"
)

func (a *app) sinksCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "sinks",
		Short: "List, test, pause or resume sinks for every relay of the cluster, or forget a stale pause",
		Example: `  outboxd sinks list
  outboxd sinks pause ops-slack --for 30m --reason "Slack incident"
  outboxd sinks resume ops-slack`,
	}
	c.AddCommand(a.sinkListCommand(), a.sinkTestCommand(), a.sinkPauseCommand(), a.sinkResumeCommand(), a.sinkForgetCommand())
	return c
}

// sinkChange holds the flags pause and resume share.
type sinkChange struct {
	by, reason string
}

func (a *app) sinkChangeFlags(c *cobra.Command, ch *sinkChange) {
	c.Flags().StringVar(&ch.reason, "reason", "", "why (a `reason`), recorded with the sink and shown in the console")
	c.Flags().StringVar(&ch.by, "by", "", "who (a `name`), recorded with the sink (default: $USER@host, which the audit trail records in any case)")
}

// actor is who a command acts for in the audit trail: $USER@host, an
// admin (the database is all a command needs), from the command line.
func (a *app) actor() audit.Actor {
	user, _ := a.io.Env("USER")
	if user == "" {
		user = "unknown"
	}
	name := user
	if host, err := os.Hostname(); err == nil {
		name += "@" + host
	}
	return audit.Actor{Name: name, Role: string(access.RoleAdmin), Source: audit.SourceCLI}
}

// unknownSink says that the configuration has no sink name, with what,
// when given, the rest of the sentence, and names the configured sink
// nearest to it (confschema.Nearest, as the configuration suggests keys).
// It is "" when name is "" or configured.
func unknownSink(cfg *config.Config, name, what string) string {
	if _, ok := cfg.Sinks[name]; name == "" || ok {
		return ""
	}
	text := "no sink " + name + " is configured" + what
	if near := confschema.Nearest(name, slices.Sorted(maps.Keys(cfg.Sinks))); near != "" {
		text += "; did you mean " + near + "?"
	}
	return text
}

// warnUnknownSink warns when a filter's sink is not configured: a typo
// would otherwise find nothing, silently. The command goes on (its empty
// answer is true): a sink that was removed, or that another relay's
// configuration has, may have rows.
func (a *app) warnUnknownSink(s session, name string) {
	if w := unknownSink(s.cfg, name, ""); w != "" {
		a.warn(w)
	}
}

func (a *app) sinkPauseCommand() *cobra.Command {
	var (
		ch       sinkChange
		duration time.Duration
		force    bool
	)
	c := &cobra.Command{
		Use:   "pause NAME [--for D] [--reason R]",
		Short: "Stop every relay from delivering to a sink, until --for has passed or `sinks resume`",
		Long: `Pauses the sink cluster-wide, the way a receiver's Retry-After does: running
relays are told at once, relays that start later read the pause. Deliveries
already under way finish. Without --for the sink stays paused until resumed.
A name that is neither configured nor has messages is refused (exit 2), a
typo's pause would stop nothing; --force pauses it anyway.`,
		Example: `  outboxd sinks pause ops-slack --for 30m --reason "Slack incident"
  outboxd sinks pause partner-webhook --by alice --reason "partner maintenance"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSinkArg,
		PreRunE: func(_ *cobra.Command, args []string) error {
			if duration < 0 {
				return badInputf("--for must not be negative")
			}
			return badInputIf(api.CheckSinkName(args[0]))
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			sink := cmd.Flags().Arg(0)
			if !force {
				_, configured := s.cfg.Sinks[sink]
				err := s.ops.CheckSinkKnown(cmd.Context(), s.pool, sink, configured)
				if errors.Is(err, operator.ErrUnknownSink) {
					return badInputf("sinks pause: %s (pass --force to pause %s anyway)",
						unknownSink(s.cfg, sink, " and the outbox has no messages of it: its pause would stop nothing"), sink)
				}
				if err != nil {
					return err
				}
			}
			until, err := s.ops.PauseSink(cmd.Context(), s.pool, a.actor(), sink, operator.Pause{For: duration, By: ch.by, Reason: ch.reason})
			if err != nil {
				return err
			}
			if duration == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "paused %s until resumed\n", terminalText(sink))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "paused %s until %s\n", terminalText(sink), until.UTC().Format(time.RFC3339))
			}
			return nil
		}),
	}
	c.Flags().DurationVar(&duration, "for", 0, "how long, a `duration` such as 30m (default: until resumed)")
	c.Flags().BoolVar(&force, "force", false, "pause a name that is neither configured nor has messages")
	a.sinkChangeFlags(c, &ch)
	return c
}

func (a *app) sinkResumeCommand() *cobra.Command {
	var ch sinkChange
	c := &cobra.Command{
		Use:   "resume NAME [--reason R]",
		Short: "End a sink's pause (by hand or by a Retry-After) on every relay at once",
		Long: `Ends a sink's pause, by hand or by a Retry-After, on every relay at once,
and closes its open circuit breakers. It needs only the database.`,
		Example:           `  outboxd sinks resume ops-slack --reason "Slack is back"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSinkArg,
		PreRunE: func(_ *cobra.Command, args []string) error {
			return badInputIf(api.CheckSinkName(args[0]))
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			sink := cmd.Flags().Arg(0)
			res, err := s.ops.ResumeSink(cmd.Context(), s.pool, a.actor(), sink, ch.by, ch.reason)
			if err != nil {
				return err
			}
			for _, b := range res.Closed {
				fmt.Fprintf(cmd.OutOrStdout(), "closed the circuit breaker of %s%s (open since %s: %s)\n", terminalText(sink),
					keySuffix(b.Key), b.Since.UTC().Format(time.RFC3339), terminalText(b.Reason))
			}
			if res.WasPaused {
				fmt.Fprintf(cmd.OutOrStdout(), "resumed %s\n", terminalText(sink))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was not paused\n", terminalText(sink))
			}
			return nil
		}),
	}
	a.sinkChangeFlags(c, &ch)
	return c
}

func (a *app) sinkForgetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "forget NAME",
		Short: "Delete the recorded pause and state of a sink that is not configured (a typo's pause, a removed sink's)",
		Long: `Deletes what the outbox records for a sink that is not in the configuration:
its pause (ended on every relay at once), who paused or resumed it last, and
its rate limit's clock. The sink leaves the console and the stats unless it
has messages. A configured sink is refused (exit 2): resume it instead. A
name without recorded state is an error (exit 1).`,
		Example:           `  outboxd sinks forget ops-slak   # the typo someone paused`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSinkArg,
		PreRunE: func(_ *cobra.Command, args []string) error {
			return badInputIf(api.CheckSinkName(args[0]))
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			sink := cmd.Flags().Arg(0)
			_, configured := s.cfg.Sinks[sink]
			was, err := s.ops.ForgetSink(cmd.Context(), s.pool, a.actor(), sink, configured)
			if errors.Is(err, operator.ErrConfiguredSink) {
				return badInput(err)
			}
			if err != nil {
				return err
			}
			if was {
				fmt.Fprintf(cmd.OutOrStdout(), "forgot %s (its pause ended)\n", terminalText(sink))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "forgot %s\n", terminalText(sink))
			}
			return nil
		}),
	}
}

// keySuffix names a destination key after its sink's name, if any.
func keySuffix(key string) string {
	if key == "" {
		return ""
	}
	return " for key " + terminalText(key)
}
