package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/httpapi"
)

func (a *app) statsCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "stats",
		Short: "Per sink: pending, in progress, failed, sent and dead rows, and the oldest pending age",
		Args:  cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			report, err := httpapi.Stats(cmd.Context(), s.cfg, s.ops, s.pool)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), report)
			}
			return writeStatsTable(cmd.OutOrStdout(), report)
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return c
}

// notConfiguredNote marks, in the stats table, a sink that has rows but is
// not in this configuration.
const notConfiguredNote = "not configured on this relay"

func writeStatsTable(w io.Writer, r httpapi.StatsReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINK\tPENDING\tIN_PROGRESS\tFAILED\tSENT\tDEAD\tOLDEST_PENDING\tNOTE")
	for _, name := range slices.Sorted(maps.Keys(r.Sinks)) {
		s := r.Sinks[name]
		age := time.Duration(s.OldestPendingAgeSeconds * float64(time.Second)).Round(time.Second)
		var notes []string
		if !s.Configured {
			notes = append(notes, notConfiguredNote)
		}
		if p := s.Pause; p != nil && p.Paused() {
			notes = append(notes, pauseNote(*p))
		}
		note := strings.Join(notes, "; ")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", terminalCell(name), s.Pending, s.InProgress, s.Failed, s.Sent, s.Dead, age, note)
	}
	return tw.Flush()
}

// pauseNote describes a paused sink's pause in the stats table.
func pauseNote(p operator.SinkState) string {
	how := "by a Retry-After"
	if p.ByHand {
		how = "by " + terminalCell(p.ChangedBy)
	}
	if p.UntilResumed {
		return "paused until resumed, " + how
	}
	return "paused until " + p.PausedUntil.UTC().Format(time.RFC3339) + ", " + how
}

// writeJSON prints v as indented JSON, its strings safe for a terminal
// (see terminalJSON).
func writeJSON(w io.Writer, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(terminalJSON(js), '\n'))
	return err
}
