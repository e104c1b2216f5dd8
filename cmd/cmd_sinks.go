package cmd

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/httpapi"
)

func (a *app) sinksCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "sinks",
		Short: "Pause or resume a sink for every relay of the cluster",
	}
	c.AddCommand(a.sinkPauseCommand(), a.sinkResumeCommand())
	return c
}

// sinkChange holds the flags pause and resume share.
type sinkChange struct {
	by, reason string
}

func (a *app) sinkChangeFlags(c *cobra.Command, ch *sinkChange) {
	c.Flags().StringVar(&ch.reason, "reason", "", "why, recorded with the sink and shown in the console")
	c.Flags().StringVar(&ch.by, "by", "", "who, recorded with the sink (default: $USER@host)")
}

// operator is who a command acts for: --by, else $USER@host.
func (a *app) operator(by string) string {
	if by != "" {
		return by
	}
	user, _ := a.io.Env("USER")
	if user == "" {
		user = "unknown"
	}
	host, err := os.Hostname()
	if err != nil {
		return user + " (cli)"
	}
	return user + "@" + host + " (cli)"
}

func (a *app) sinkPauseCommand() *cobra.Command {
	var (
		ch       sinkChange
		duration time.Duration
	)
	c := &cobra.Command{
		Use:   "pause NAME [--for D] [--reason R]",
		Short: "Stop every relay from delivering to a sink, until --for has passed or `sinks resume`",
		Long: `Pauses the sink cluster-wide, the way a receiver's Retry-After does: running
relays are told at once, relays that start later read the pause. Deliveries
already under way finish. Without --for the sink stays paused until resumed.`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if duration < 0 {
				return badInputf("--for must not be negative")
			}
			return badInputIf(httpapi.CheckSinkName(args[0]))
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			sink := cmd.Flags().Arg(0)
			until, err := s.ops.PauseSink(cmd.Context(), s.pool, sink, operator.Pause{For: duration, By: a.operator(ch.by), Reason: ch.reason})
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
	c.Flags().DurationVar(&duration, "for", 0, "how long (default: until resumed)")
	a.sinkChangeFlags(c, &ch)
	return c
}

func (a *app) sinkResumeCommand() *cobra.Command {
	var ch sinkChange
	c := &cobra.Command{
		Use:   "resume NAME [--reason R]",
		Short: "End a sink's pause (by hand or by a Retry-After) on every relay at once",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return badInputIf(httpapi.CheckSinkName(args[0]))
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			sink := cmd.Flags().Arg(0)
			res, err := s.ops.ResumeSink(cmd.Context(), s.pool, sink, a.operator(ch.by), ch.reason)
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

// keySuffix names a destination key after its sink's name, if any.
func keySuffix(key string) string {
	if key == "" {
		return ""
	}
	return " for key " + terminalText(key)
}
