package cmd

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/audit"
)

// defaultAuditSince is how far back `audit list` looks unless --since says.
const defaultAuditSince = "24h"

func (a *app) auditCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "audit",
		Short:   "Read the audit trail: who paused, resumed, redrove, purged, applied routes or migrated, and when",
		Example: `  outboxd audit list --since 2h`,
	}
	var (
		since string
		limit int
		o     output
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
		Args:    cobra.NoArgs,
		PreRunE: checkOutput(&o, nil),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			from, err := audit.ParseSince(since, time.Now())
			if err != nil {
				return badInputf("--%w", err)
			}
			entries, err := s.ops.Audit().List(cmd.Context(), s.pool, audit.Filter{Since: from, Limit: limit})
			if err != nil {
				return err
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"entries": entries})
			}
			return writeAuditTable(cmd.OutOrStdout(), entries, o.wide())
		}),
	}
	list.Flags().StringVar(&since, "since", defaultAuditSince, "entries recorded since a `time`: a duration back from now (24h) or an RFC 3339 time")
	list.Flags().IntVar(&limit, "limit", audit.DefaultLimit, fmt.Sprintf("at most this many entries, a `number` (up to %d)", audit.MaxLimit))
	addOutputFlags(list, &o, `{"entries": [...]}`)
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
