package httpapi

import (
	"context"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/operator"
)

// StatsReport is the JSON shape of `outboxd stats --json` and GET /v1/stats.
type StatsReport struct {
	Sinks map[string]SinkStatsReport `json:"sinks"`
}

// SinkStatsReport is one sink's row counts and the age of its oldest
// waiting row in seconds.
type SinkStatsReport struct {
	operator.SinkStats
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// Configured is false for a sink that has rows but is not in this
	// configuration: relays configured like this one leave its rows alone.
	Configured bool `json:"configured"`
	// Pause is the sink's pause state, for a sink with any: paused now (by
	// a Retry-After or by hand) or paused or resumed by hand at some time.
	// A sink with a pause and without rows or configuration is listed for
	// it, so a pause of a name no relay delivers to shows (`sinks forget`
	// removes it).
	Pause *operator.SinkState `json:"pause,omitempty"`
}

// Stats reads the stats and lists every configured sink, with zeros
// for a sink that has no rows yet, and every sink that has rows or pause
// state, marking those this configuration does not have.
func Stats(ctx context.Context, cfg *config.Config, ops *operator.Operator, db core.DBTX) (StatsReport, error) {
	stats, err := ops.Stats(ctx, db)
	if err != nil {
		return StatsReport{}, err
	}
	states, err := ops.SinkStates(ctx, db)
	if err != nil {
		return StatsReport{}, err
	}
	report := StatsReport{Sinks: map[string]SinkStatsReport{}}
	for name := range cfg.Sinks {
		report.Sinks[name] = SinkStatsReport{Configured: true}
	}
	for name, s := range stats {
		_, configured := cfg.Sinks[name]
		report.Sinks[name] = SinkStatsReport{SinkStats: s, OldestPendingAgeSeconds: s.OldestPendingAge.Seconds(), Configured: configured}
	}
	for name, state := range states {
		r := report.Sinks[name]
		_, r.Configured = cfg.Sinks[name]
		r.Pause = &state
		report.Sinks[name] = r
	}
	return report, nil
}
