package api

import (
	"context"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
)

// StatsReport is the JSON shape of `outboxd stats --json` and GET /v1/stats:
// the cluster's stats snapshot (operator.StatsSnapshot), never a count over
// the whole table and its delivered history.
type StatsReport struct {
	Sinks map[string]SinkStatsReport `json:"sinks"`
	// TakenAt is when the counts were computed, TakenBy by which relay
	// (or tool).
	TakenAt time.Time `json:"taken_at"`
	TakenBy string    `json:"taken_by"`
}

// SinkStatsReport is one sink's row counts and the age of its oldest
// waiting row in seconds.
type SinkStatsReport struct {
	operator.SinkCounts
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// Configured is false for a sink that has rows but is not in this
	// configuration: relays configured like this one leave its rows alone.
	Configured bool `json:"configured"`
	// Breakers are the sink's open circuit breakers (the sink's, or its
	// destination keys'); none while it is healthy.
	Breakers []operator.BreakerState `json:"breakers"`
	// Circuit is the state of the sink's own breaker: closed, open or
	// probing (a sink limited per key has a breaker per key instead, in
	// Breakers).
	Circuit status.Breaker `json:"circuit"`
	// Pause is the sink's pause state, for a sink with any: paused now (by
	// a Retry-After or by hand) or paused or resumed by hand at some time.
	// A sink with a pause and without rows or configuration is listed for
	// it, so a pause of a name no relay delivers to shows (`sinks forget`
	// removes it).
	Pause *operator.SinkState `json:"pause,omitempty"`
}

// circuitOf is the state of the sink's own breaker among breakers.
func circuitOf(breakers []operator.BreakerState) status.Breaker {
	for _, b := range breakers {
		if b.Key == "" {
			return b.State
		}
	}
	return status.BreakerClosed
}

// Stats reads the stats snapshot, recomputing it first (as by) when it is
// older than maxAge (0: always) or was never taken, and lists every
// configured sink, with zeros for a sink that has no rows yet, and every
// sink that has rows, marking those this configuration does not have.
// Recomputing reads the partial indexes and the last hour of sent rows
// only. A sink with pause state is listed too, so a pause of a name no
// relay delivers to shows (`sinks forget` removes it).
func Stats(ctx context.Context, cfg *config.Config, ops *operator.Operator, db outboxd.DBTX, by string, maxAge time.Duration) (StatsReport, error) {
	snap, err := ops.StatsSnapshot(ctx, db)
	if err != nil {
		return StatsReport{}, err
	}
	if snap.TakenAt.IsZero() || time.Since(snap.TakenAt) > maxAge {
		if err := ops.RefreshStatsSnapshot(ctx, db, by); err != nil {
			return StatsReport{}, err
		}
		if snap, err = ops.StatsSnapshot(ctx, db); err != nil {
			return StatsReport{}, err
		}
	}
	states, err := ops.SinkStates(ctx, db)
	if err != nil {
		return StatsReport{}, err
	}
	breakers, err := ops.Breakers(ctx, db)
	if err != nil {
		return StatsReport{}, err
	}
	report := StatsReport{Sinks: map[string]SinkStatsReport{}, TakenAt: snap.TakenAt, TakenBy: snap.TakenBy}
	for name := range cfg.Sinks {
		report.Sinks[name] = SinkStatsReport{}
	}
	for name, s := range snap.Sinks {
		report.Sinks[name] = SinkStatsReport{SinkCounts: s, OldestPendingAgeSeconds: s.OldestPendingAge.Seconds()}
	}
	for name, state := range states {
		r := report.Sinks[name]
		r.Pause = &state
		report.Sinks[name] = r
	}
	for name, r := range report.Sinks {
		_, r.Configured = cfg.Sinks[name]
		r.Breakers, r.Circuit = breakers[name], circuitOf(breakers[name])
		report.Sinks[name] = r
	}
	return report, nil
}
