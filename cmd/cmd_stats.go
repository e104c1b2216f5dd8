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

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/server/api"
)

func (a *app) statsCommand() *cobra.Command {
	var o output
	c := &cobra.Command{
		Use:   "stats [-o table|wide|json]",
		Short: "Per sink: pending, in progress, failed, dead and last hour's sent rows, the oldest pending age, and open circuit breakers",
		Long: `Per sink: pending, in progress, failed, dead and last hour's sent rows, the
oldest pending message's age, the circuit breaker and any pause, how many
rows wait on disabled destinations (waiting_disabled), then the open
circuit breakers by destination. It needs only the database: the
sinks' options and their secrets are not read. -o wide adds the sinks'
types and limits.`,
		Example: `  DATABASE_URL=postgres://outboxd@db/app outboxd stats
  outboxd stats -o json | jq '.sinks["ops-slack"].dead'`,
		Args:    cobra.NoArgs,
		PreRunE: checkOutput(&o, nil),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			a.warnSinksUnknown(s.cfg)
			// A command run by hand shows the counts of now: it recomputes
			// the snapshot (partial indexes and the last hour of sent rows).
			report, err := api.Stats(cmd.Context(), s.cfg, s.ops, s.pool, "outboxd stats", 0)
			if err != nil {
				return err
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), report)
			}
			return writeStatsTable(cmd.OutOrStdout(), report, s.cfg, o.wide())
		}),
	}
	addOutputFlags(c, &o, "one object, as GET /v1/stats")
	return c
}

// notConfiguredNote marks, in the stats table, a sink that has rows but is
// not in this configuration.
const notConfiguredNote = "not configured on this relay"

// waitingDisabledNote says, in the stats table, how many of a sink's
// pending rows wait on disabled destinations: no relay delivers them until
// their destination is enabled again.
const waitingDisabledNote = "%d waiting on disabled destinations"

func writeStatsTable(w io.Writer, r api.StatsReport, cfg *config.Config, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "SINK\tPENDING\tIN_PROGRESS\tFAILED\tSENT_LAST_HOUR\tDEAD\tOLDEST_PENDING\tCIRCUIT\tPAUSE\tNOTE"
	if wide {
		header += "\tTYPE\tMAX_ATTEMPTS\tRATE_LIMIT\tMAX_IN_FLIGHT\tTAKEN_AT"
	}
	fmt.Fprintln(tw, header)
	for _, name := range slices.Sorted(maps.Keys(r.Sinks)) {
		s := r.Sinks[name]
		age := time.Duration(s.OldestPendingAgeSeconds * float64(time.Second)).Round(time.Second)
		var notes []string
		if !s.Configured && sinksKnown(cfg) {
			notes = append(notes, notConfiguredNote)
		}
		if s.WaitingDisabled > 0 {
			notes = append(notes, fmt.Sprintf(waitingDisabledNote, s.WaitingDisabled))
		}
		note := strings.Join(notes, "; ")
		line := fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s", terminalCell(name), s.Pending, s.InProgress, s.Failed, s.SentLastHour, s.Dead, age,
			s.Circuit, pauseCell(s.Pause), orDash(note))
		if wide {
			line += "\t" + policyCells(cfg, name) + "\t" + r.TakenAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeBreakersTable(w, r)
}

// policyCells are the type and limits of sink name for the wide stats
// table, dashes for a sink that is not configured.
func policyCells(cfg *config.Config, name string) string {
	spec, ok := cfg.Sinks[name]
	if !ok {
		return "-\t-\t-\t-"
	}
	l := newSinkListing(name, spec, nil)
	return fmt.Sprintf("%s\t%d\t%s\t%d", terminalCell(l.Type), l.MaxAttempts, rateLimitCell(l.RateLimit), l.MaxInFlight)
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
func writeBreakersTable(w io.Writer, r api.StatsReport) error {
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
