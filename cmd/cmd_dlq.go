package cmd

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/server/api"
)

func (a *app) dlqCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "List, redrive or purge dead letters",
		Example: `  outboxd dlq list --sink ops-slack
  outboxd dlq redrive --all --sink ops-slack --error timeout
  outboxd dlq purge --id 17,18 --yes`,
		Long: `List, redrive or purge dead letters: messages that failed for good or ran out
of attempts.

Rows of a sink that this configuration does not have are not dead letters:
relays leave them pending, untouched, for a relay configured with their sink
(during a rolling deploy that adds a sink, the new pods deliver them).
outboxd stats lists such sinks as not configured. If the sink is a mistake (a
typo in a producer's sink name, a removed sink), configure it or delete its
rows: outboxd dlq purge --all --waiting --sink NAME. The rows waiting on one
disabled destination go the same way, counted first: outboxd dlq purge --all
--waiting --destination ID.`,
	}
	c.AddCommand(a.dlqListCommand(),
		a.dlqActionCommand("redrive", "Move dead letters back to pending with their attempts reset", "redriven", (*operator.Operator).Redrive),
		a.dlqActionCommand("purge", "Delete dead letters and their recorded errors", "purged", (*operator.Operator).Purge),
	)
	return c
}

func (a *app) dlqListCommand() *cobra.Command {
	var (
		o      output
		filter operator.DeadLetterFilter
	)
	c := &cobra.Command{
		Use:   "list [--sink S] [--error TEXT] [--after ID] [--limit N] [-o table|wide|json]",
		Short: "List dead letters, oldest first, with the error of every failed attempt",
		Long: `Lists dead letters, oldest first, a page at a time (--after continues after
the last id of a page), with the error of every failed attempt. It needs
only the database: the sinks' options and their secrets are not read.
-o wide adds when each was created; -o json has the payloads and receipts.
A --sink that is not configured is warned about on stderr, naming the
nearest configured sink; the list is still printed (exit 0).`,
		Example: `  outboxd dlq list --sink ops-slack
  outboxd dlq list --error timeout --limit 20 -o json`,
		Args:    cobra.NoArgs,
		PreRunE: checkOutput(&o, nil),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			a.warnUnknownSink(s, filter.Sink)
			letters, err := s.ops.DeadLetters(cmd.Context(), s.pool, filter)
			if err != nil {
				return err
			}
			if o.json() {
				if letters == nil {
					letters = []operator.DeadLetter{}
				}
				return writeJSON(cmd.OutOrStdout(), letters)
			}
			return writeDeadLetters(cmd.OutOrStdout(), letters, o.wide())
		}),
	}
	c.Flags().StringVar(&filter.Sink, "sink", "", "only this `sink`'s dead letters")
	c.Flags().StringVar(&filter.ErrorContains, "error", "", "only dead letters whose last error contains this `text` (ignoring case)")
	c.Flags().Int64Var(&filter.After, "after", 0, "only dead letters with a larger `id` (the last id of the previous page)")
	c.Flags().IntVar(&filter.Limit, "limit", operator.DefaultDeadLetterLimit, "at most this `many`")
	_ = c.RegisterFlagCompletionFunc("sink", a.completeSinks)
	addOutputFlags(c, &o, "an array, with payloads, creation times and receipts")
	return c
}

func writeDeadLetters(w io.Writer, letters []operator.DeadLetter, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	created, pad := "", ""
	if wide {
		created, pad = "CREATED_AT\t", "\t"
	}
	fmt.Fprintln(tw, "ID\tSINK\tDEDUP_KEY\tATTEMPTS\t"+created+"UPDATED_AT\tLAST_ERROR")
	for _, d := range letters {
		if wide {
			created = d.CreatedAt.UTC().Format(time.RFC3339) + "\t"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s%s\t%s\n", d.ID, terminalCell(d.Sink), terminalCell(d.DedupKey), d.Attempts,
			created, d.UpdatedAt.UTC().Format(time.RFC3339), terminalCell(d.LastError))
		for _, e := range d.Errors {
			fmt.Fprintf(tw, "\t\t  attempt %d\t\t%s%s\t%s\n", e.Attempt, pad, e.FailedAt.UTC().Format(time.RFC3339), terminalCell(e.Error))
		}
	}
	return tw.Flush()
}

// cliSelection are the flags of a dead-letter selection.
var cliSelection = api.SelectionWords{IDs: "--id", All: "--all", Sink: "--sink", Error: "--error", Waiting: "--waiting", Destination: "--destination"}

// dlqActionCommand builds redrive or purge, destructive commands (see
// destructive): on a terminal, unless --yes, it counts the selection with
// a dry run first and asks before acting on exactly the rows counted;
// elsewhere it needs --yes. Ids that name no dead letter make it exit 1
// after acting on the others.
func (a *app) dlqActionCommand(name, short, done string, action api.DeadLetterAction) *cobra.Command {
	var (
		filter operator.RedriveFilter
		d      destructive
		o      output
	)
	c := &cobra.Command{
		Use:   name + " (--id N... | --all [--sink S] [--error TEXT]) [--dry-run] [--yes] [-o table|json]",
		Short: short,
		Long: short + ` (needs only the database). On a terminal it counts the
selection first and asks before acting on exactly the rows counted, unless
--yes; --dry-run only counts. Without a terminal (a script, a pipe,
kubectl exec without -t) it acts only with --yes: without it, it exits 2.
A --sink that is not configured is warned about, naming the nearest
configured sink.`,
		Example: fmt.Sprintf(`  outboxd dlq %[1]s --id 17 --id 18
  outboxd dlq %[1]s --all --sink ops-slack --error "rate limited" --dry-run
  outboxd dlq %[1]s --all --yes`, name),
		Args: cobra.NoArgs,
		PreRunE: checkOutput(&o, func(*cobra.Command, []string) error {
			if err := api.CheckSelection(filter, cliSelection); err != nil {
				return badInputf("%s: %w", name, err)
			}
			return d.check(a, "dlq "+name)
		}),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			ctx := cmd.Context()
			a.warnUnknownSink(s, filter.Sink)
			filter.DryRun = d.dryRun
			if d.asks() {
				plan := filter
				plan.DryRun = true
				res, err := action(s.ops, ctx, s.pool, a.actor(), plan)
				if err != nil {
					return err
				}
				if res.Rows == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "%s 0\n", done)
					return missingDeadLetters(res.Missing)
				}
				if err := a.approve(name, fmt.Sprintf("%s %d %s?", name, res.Rows, describeSelection(filter))); err != nil {
					return err
				}
				filter.Token = res.Token // exactly the rows counted
			}
			res, err := action(s.ops, ctx, s.pool, a.actor(), filter)
			if errors.Is(err, operator.ErrSelectionChanged) {
				return &exitError{code: exitFailure, err: fmt.Errorf(
					"%s: the selection changed since it was counted (dead letters died, or were redriven or purged meanwhile); nothing changed; it now holds %d: run the command again",
					name, res.Rows)}
			}
			if err != nil {
				return err
			}
			switch {
			case o.json():
				if err := writeJSON(cmd.OutOrStdout(), api.ActionAnswer(done, res)); err != nil {
					return err
				}
			case res.DryRun:
				fmt.Fprintf(cmd.OutOrStdout(), "would be %s: %d\n", done, res.Rows)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s %d\n", done, res.Rows)
			}
			return missingDeadLetters(res.Missing)
		}),
	}
	c.Flags().Int64SliceVar(&filter.IDs, "id", nil, "a dead letter's `id` (repeat or comma-separate)")
	c.Flags().BoolVar(&filter.All, "all", false, "every dead letter (of --sink, with --error, when given)")
	c.Flags().StringVar(&filter.Sink, "sink", "", "with --all: only this `sink`'s dead letters")
	c.Flags().StringVar(&filter.ErrorContains, "error", "", "with --all: only dead letters whose last error contains this `text` (ignoring case)")
	_ = c.RegisterFlagCompletionFunc("sink", a.completeSinks)
	d.add(c, done)
	addOutputFlags(c, &o, fmt.Sprintf(`{"%s", "dry_run", "last_id", "token", "missing"}, as the API answers`, done))
	if name == "purge" {
		c.Flags().BoolVar(&filter.Waiting, "waiting", false,
			"with --all and --sink or --destination: also delete their rows still waiting for delivery (for a sink no relay is configured with, a disabled destination)")
		c.Flags().StringVar(&filter.Destination, "destination", "", "with --all: only the rows of this destination `id` (dst_...; with --waiting, its waiting rows too)")
		c.Example += fmt.Sprintf("\n  outboxd dlq %s --all --waiting --destination dst_kx2m4fq7rj3v5wzp --dry-run", name)
	}
	return c
}

// describeSelection says in words which dead letters f selects.
func describeSelection(f operator.RedriveFilter) string {
	if len(f.IDs) > 0 {
		return "dead letter(s) with the given ids"
	}
	var b strings.Builder
	b.WriteString("dead letter(s)")
	if f.Waiting {
		b.WriteString(" and waiting rows")
	}
	if f.Sink != "" {
		fmt.Fprintf(&b, " of sink %s", terminalText(f.Sink))
	}
	if f.Destination != "" {
		fmt.Fprintf(&b, " of destination %s", terminalText(f.Destination))
	}
	if f.ErrorContains != "" {
		fmt.Fprintf(&b, " whose last error contains %q", terminalText(f.ErrorContains))
	}
	return b.String()
}

// missingDeadLetters is the error for ids that named no dead letter.
func missingDeadLetters(ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("no dead letter with id %s (no such row, or not dead)", joinIDs(ids))}
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}
