package cmd

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core"
)

func (a *app) dlqCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "List, redrive or purge dead letters",
		Long: `List, redrive or purge dead letters: messages that failed for good or ran out
of attempts.

Rows of a sink that this configuration does not have are not dead letters:
relays leave them pending, untouched, for a relay configured with their sink
(during a rolling deploy that adds a sink, the new pods deliver them).
outboxd stats lists such sinks as not configured. If the sink is a mistake (a
typo in a producer's sink name, a removed sink), configure it or delete its
rows: outboxd dlq purge --all --waiting --sink NAME.`,
	}
	c.AddCommand(a.dlqListCommand(),
		a.dlqActionCommand("redrive", "Move dead letters back to pending with their attempts reset", "redriven", (*core.Outbox).Redrive),
		a.dlqActionCommand("purge", "Delete dead letters and their recorded errors", "purged", (*core.Outbox).Purge),
	)
	return c
}

func (a *app) dlqListCommand() *cobra.Command {
	var (
		asJSON bool
		filter core.DeadLetterFilter
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, oldest first, with the error of every failed attempt",
		Args:  cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			letters, err := s.ob.DeadLetters(cmd.Context(), s.pool, filter)
			if err != nil {
				return err
			}
			if asJSON {
				if letters == nil {
					letters = []core.DeadLetter{}
				}
				return writeJSON(cmd.OutOrStdout(), letters)
			}
			return writeDeadLetters(cmd.OutOrStdout(), letters)
		}),
	}
	c.Flags().StringVar(&filter.Sink, "sink", "", "only this sink's dead letters")
	c.Flags().IntVar(&filter.Limit, "limit", core.DefaultDeadLetterLimit, "at most this many")
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

func writeDeadLetters(w io.Writer, letters []core.DeadLetter) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSINK\tDEDUP_KEY\tATTEMPTS\tUPDATED_AT\tLAST_ERROR")
	for _, d := range letters {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", d.ID, terminalCell(d.Sink), terminalCell(d.DedupKey), d.Attempts,
			d.UpdatedAt.UTC().Format(time.RFC3339), terminalCell(d.LastError))
		for _, e := range d.Errors {
			fmt.Fprintf(tw, "\t\t  attempt %d\t\t%s\t%s\n", e.Attempt, e.FailedAt.UTC().Format(time.RFC3339), terminalCell(e.Error))
		}
	}
	return tw.Flush()
}

// dlqAction is Outbox.Redrive or Outbox.Purge.
type dlqAction func(*core.Outbox, context.Context, core.DBTX, core.RedriveFilter) (core.ActionResult, error)

func (a *app) dlqActionCommand(name, short, done string, action dlqAction) *cobra.Command {
	var filter core.RedriveFilter
	c := &cobra.Command{
		Use:   name + " (--id N... | --all [--sink S])",
		Short: short,
		Args:  cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if len(filter.IDs) == 0 && !filter.All {
				return badInputf("%s: give --id N (repeatable) or --all", name)
			}
			if len(filter.IDs) > 0 && (filter.All || filter.Sink != "") {
				return badInputf("%s: --id cannot be combined with --all or --sink", name)
			}
			if filter.Waiting && (!filter.All || filter.Sink == "") {
				return badInputf("%s: --waiting needs --all and --sink", name)
			}
			return nil
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			n, err := action(s.ob, cmd.Context(), s.pool, filter)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d\n", done, n.Rows)
			return nil
		}),
	}
	c.Flags().Int64SliceVar(&filter.IDs, "id", nil, "a dead letter's id (repeat or comma-separate)")
	c.Flags().BoolVar(&filter.All, "all", false, "every dead letter (of --sink, when given)")
	c.Flags().StringVar(&filter.Sink, "sink", "", "with --all: only this sink's dead letters")
	if name == "purge" {
		c.Flags().BoolVar(&filter.Waiting, "waiting", false,
			"with --all --sink: also delete the sink's rows still waiting for delivery (for a sink no relay is configured with)")
	}
	return c
}
