package cmd

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
)

// sinkListing is one sink of `sinks list -o json`: its configured policy
// (effective: defaults applied), its circuit breakers and its pause.
type sinkListing struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	MaxAttempts  int    `json:"max_attempts"`
	MaxDeferrals int    `json:"max_deferrals"`
	Backoff      struct {
		Initial string `json:"initial"`
		Max     string `json:"max"`
	} `json:"backoff"`
	// RateLimit is the configured limit; nil for none configured (a sink
	// type with a limit of its own, Slack's, still applies it).
	RateLimit *rateLimitListing `json:"rate_limit"`
	// MaxInFlight is per process.
	MaxInFlight    int                     `json:"max_in_flight"`
	BreakerEnabled bool                    `json:"circuit_breaker_enabled"`
	Circuit        status.Breaker          `json:"circuit"`
	Breakers       []operator.BreakerState `json:"breakers"`
	Pause          *operator.SinkState     `json:"pause"`
}

type rateLimitListing struct {
	Rate   int    `json:"rate"`
	Per    string `json:"per"`
	Burst  int    `json:"burst"`
	PerKey bool   `json:"per_key"`
}

func (a *app) sinkListCommand() *cobra.Command {
	var o output
	c := &cobra.Command{
		Use:   "list [-o table|wide|json]",
		Short: "List the configured sinks: type, limits, circuit breaker and pause",
		Long: `Lists the sinks of the configuration with their effective policy (attempts,
rate limit, deliveries in flight per process), the state of their circuit
breaker and their pause, read from the database. It needs only the
database: the sinks' options and their secrets are not read. -o wide adds
the backoff, the deferrals and who paused or resumed a sink last.`,
		Example: `  outboxd sinks list
  outboxd sinks list -o json | jq -r '.[] | select(.pause.paused_until != null) | .name'`,
		Args:    cobra.NoArgs,
		PreRunE: checkOutput(&o, nil),
		RunE: a.withDB(func(cmd *cobra.Command, s session) error {
			a.warnSinksUnknown(s.cfg)
			states, err := s.ops.SinkStates(cmd.Context(), s.pool)
			if err != nil {
				return err
			}
			breakers, err := s.ops.Breakers(cmd.Context(), s.pool)
			if err != nil {
				return err
			}
			list := []sinkListing{}
			for _, name := range slices.Sorted(maps.Keys(s.cfg.Sinks)) {
				l := newSinkListing(name, s.cfg.Sinks[name], breakers[name])
				if st, ok := states[name]; ok {
					l.Pause = &st
				}
				list = append(list, l)
			}
			if o.json() {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			return writeSinkList(cmd.OutOrStdout(), list, o.wide())
		}),
	}
	addOutputFlags(c, &o, "an array of sinks")
	return c
}

// sinksKnown reports whether cfg says which sinks exist: the built-in
// defaults (--config given empty) configure none, so with them no sink is
// known to be unconfigured, nor the list of sinks known to be empty.
func sinksKnown(cfg *config.Config) bool { return cfg.File != "" }

// warnSinksUnknown warns, when cfg does not say which sinks exist, that
// what stats and sinks list show of the sinks is the database's alone.
func (a *app) warnSinksUnknown(cfg *config.Config) {
	if !sinksKnown(cfg) {
		a.warn("no configuration file (--config ''): the built-in defaults configure no sink, so the sinks' policies, " +
			"and which sinks a relay serves, are unknown here; give --config the relays' plugins.yaml")
	}
}

func newSinkListing(name string, spec config.SinkSpec, breakers []operator.BreakerState) sinkListing {
	l := sinkListing{Name: name, Type: spec.Type, MaxAttempts: spec.MaxAttempts, MaxDeferrals: spec.MaxDeferrals,
		MaxInFlight: spec.MaxInFlight, BreakerEnabled: spec.CircuitBreaker.Enabled == nil || *spec.CircuitBreaker.Enabled,
		Circuit: status.BreakerClosed, Breakers: breakers}
	if l.Breakers == nil {
		l.Breakers = []operator.BreakerState{}
	}
	l.Backoff.Initial, l.Backoff.Max = confschema.FormatDuration(spec.Backoff.Initial), confschema.FormatDuration(spec.Backoff.Max)
	if rl := spec.RateLimit; rl != nil {
		l.RateLimit = &rateLimitListing{Rate: rl.Rate, Per: confschema.FormatDuration(rl.Per), Burst: rl.Burst, PerKey: rl.PerKey}
	}
	for _, b := range breakers {
		if b.Key == "" {
			l.Circuit = b.State
		}
	}
	return l
}

func writeSinkList(w io.Writer, list []sinkListing, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAME\tTYPE\tMAX_ATTEMPTS\tRATE_LIMIT\tMAX_IN_FLIGHT\tCIRCUIT\tOPEN_BREAKERS\tPAUSE"
	if wide {
		header += "\tBACKOFF\tMAX_DEFERRALS\tLAST_CHANGED_BY"
	}
	fmt.Fprintln(tw, header)
	for _, l := range list {
		circuit := string(l.Circuit)
		if !l.BreakerEnabled {
			circuit = "disabled"
		}
		line := fmt.Sprintf("%s\t%s\t%d\t%s\t%d\t%s\t%d\t%s", terminalCell(l.Name), terminalCell(l.Type), l.MaxAttempts,
			rateLimitCell(l.RateLimit), l.MaxInFlight, circuit, len(l.Breakers), pauseCell(l.Pause))
		if wide {
			changed := "-"
			if p := l.Pause; p != nil && p.ChangedBy != "" {
				changed = terminalCell(p.ChangedBy)
				if p.ChangedAt != nil {
					changed += " at " + p.ChangedAt.UTC().Format(time.RFC3339)
				}
			}
			line += fmt.Sprintf("\t%s..%s\t%d\t%s", l.Backoff.Initial, l.Backoff.Max, l.MaxDeferrals, changed)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// rateLimitCell is a rate limit as "2/1s burst 5 per key", or "-".
func rateLimitCell(rl *rateLimitListing) string {
	if rl == nil {
		return "-"
	}
	s := strconv.Itoa(rl.Rate) + "/" + rl.Per
	if rl.Burst > 0 {
		s += " burst " + strconv.Itoa(rl.Burst)
	}
	if rl.PerKey {
		s += " per key"
	}
	return s
}
