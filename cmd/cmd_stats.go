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
		Short: "Per sink: pending, in progress, failed, dead and last hour's sent rows, the oldest pending age, and open circuit breakers",
		Args:  cobra.NoArgs,
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			// A command run by hand shows the counts of now: it recomputes
			// the snapshot (partial indexes and the last hour of sent rows).
			report, err := httpapi.Stats(cmd.Context(), s.cfg, s.ops, s.pool, "outboxd stats", 0)
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
	fmt.Fprintln(tw, "SINK\tPENDING\tIN_PROGRESS\tFAILED\tSENT_LAST_HOUR\tDEAD\tOLDEST_PENDING\tCIRCUIT\tPAUSE\tNOTE")
	for _, name := range slices.Sorted(maps.Keys(r.Sinks)) {
		s := r.Sinks[name]
		age := time.Duration(s.OldestPendingAgeSeconds * float64(time.Second)).Round(time.Second)
		var notes []string
		if !s.Configured {
			notes = append(notes, notConfiguredNote)
		}
		note := strings.Join(notes, "; ")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", terminalCell(name), s.Pending, s.InProgress, s.Failed, s.SentLastHour, s.Dead, age,
			s.Circuit, pauseCell(s.Pause), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeBreakersTable(w, r)
}

// pauseCell describes a sink's pause beside its breaker state: a pause by
// hand is a breaker opened by hand, so it says so, and by whom.
func pauseCell(p *operator.SinkState) string {
	switch {
	case p == nil || !p.Paused():
		return "-"
	case p.ByHand && p.UntilResumed:
		return "by hand (" + terminalCell(p.ChangedBy) + ") until resumed"
	case p.ByHand:
		return "by hand (" + terminalCell(p.ChangedBy) + ") until " + p.PausedUntil.UTC().Format(time.RFC3339)
	}
	return "Retry-After until " + p.PausedUntil.UTC().Format(time.RFC3339)
}

// writeBreakersTable lists the open circuit breakers under the stats, if
// any: each destination's state, since when, its last failure and its
// next probe.
func writeBreakersTable(w io.Writer, r httpapi.StatsReport) error {
	var open []operator.BreakerState
	for _, name := range slices.Sorted(maps.Keys(r.Sinks)) {
		open = append(open, r.Sinks[name].Breakers...)
	}
	if len(open) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCIRCUIT BREAKER\tKEY\tSTATE\tSINCE\tNEXT_PROBE\tLAST_FAILURE")
	now := time.Now()
	for _, b := range open {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%s ago)\tin %s\t%s\n", terminalCell(b.Sink), terminalCell(b.Key), b.State,
			b.Since.Format(time.RFC3339), now.Sub(b.Since).Round(time.Second), max(0, b.NextProbe.Sub(now)).Round(time.Second),
			terminalCell(b.LastFailure))
	}
	return tw.Flush()
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
