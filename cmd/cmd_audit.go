package cmd

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/audit"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputWide  = "wide"
)

// defaultAuditSince is how far back `audit list` looks unless --since says.
const defaultAuditSince = "24h"

func (a *app) auditCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail: who paused, resumed, redrove, purged, applied routes or migrated, and when",
	}
	var (
		since, output string
		asJSON        bool
		limit         int
	)
	list := &cobra.Command{
		Use:   "list [--since 24h|RFC3339] [-o table|json|wide]",
		Short: "List the operator actions recorded since a time, newest first",
		Long: `Lists the audit trail, newest first: every pause, resume, forgotten pause,
redrive, purge, routes apply and migration, whoever did it (a token's name,
the user an authenticating proxy named, or $USER@host for this command line),
with the role, the address it came from, the sink, the selection and how many
things it changed. Entries are kept as long as delivered messages
(retention.sent).`,
		Example: `  outboxd audit list
  outboxd audit list --since 2h
  outboxd audit list --since 2026-01-02T15:04:05Z -o json`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			if asJSON {
				output = outputJSON
			}
			switch output {
			case outputTable, outputJSON, outputWide:
				return nil
			}
			return badInputf("-o: want table, json or wide, got %q", output)
		},
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			from, err := audit.ParseSince(since, time.Now())
			if err != nil {
				return badInputf("--%w", err)
			}
			entries, err := s.ops.Audit().List(cmd.Context(), s.pool, audit.Filter{Since: from, Limit: limit})
			if err != nil {
				return err
			}
			switch output {
			case outputJSON:
				return writeJSON(cmd.OutOrStdout(), map[string]any{"entries": entries})
			case outputWide:
				return writeAuditTable(cmd.OutOrStdout(), entries, true)
			}
			return writeAuditTable(cmd.OutOrStdout(), entries, false)
		}),
	}
	list.Flags().StringVar(&since, "since", defaultAuditSince, "entries recorded since: a duration back from now (24h) or an RFC 3339 time")
	list.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table, json or wide")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON (-o json)")
	list.Flags().IntVar(&limit, "limit", audit.DefaultLimit, fmt.Sprintf("at most this many (up to %d)", audit.MaxLimit))
	c.AddCommand(list)
	return c
}

// writeAuditTable prints entries; wide adds the selection and the detail.
func writeAuditTable(w io.Writer, entries []audit.Entry, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "AT\tACTOR\tROLE\tSOURCE\tACTION\tSINK\tCOUNT"
	if wide {
		header += "\tFILTER\tDETAIL"
	}
	fmt.Fprintln(tw, header)
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d", e.At.UTC().Format(time.RFC3339), terminalCell(e.Actor), terminalCell(e.Role),
			terminalCell(e.Source), e.Action, terminalCell(orDash(e.Sink)), e.Count)
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s", terminalCell(orDash(string(e.Filter))), terminalCell(orDash(string(e.Detail))))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// orDash is s, or "-" for nothing.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
