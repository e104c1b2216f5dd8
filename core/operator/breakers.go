package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// BreakerState is one open circuit breaker (relay.CircuitBreaker): the
// cluster does not deliver to its receiver (a sink, or one rate key of a
// sink limited per key) but for one probe per probe interval. A receiver
// without one is closed. A sink paused by hand
// (PauseSink) is a breaker opened by hand: its SinkState says so, and
// ResumeSink closes both.
type BreakerState struct {
	Sink string `json:"sink"`
	// Key is the rate key of a sink limited per key; "" for the
	// sink as a whole.
	Key string `json:"key"`
	// State is status.BreakerOpen, or status.BreakerProbing while a
	// relay delivers a probe.
	State  status.Breaker `json:"state"`
	Since  time.Time      `json:"since"`
	Reason string         `json:"reason"`
	// LastFailure is the error that opened it or that the last probe got.
	LastFailure   string    `json:"last_failure"`
	LastFailureAt time.Time `json:"last_failure_at"`
	NextProbe     time.Time `json:"next_probe"`
	Probes        int64     `json:"probes"`
}

// Breakers lists the open circuit breakers by sink, each sink's sorted by
// key. It reads a table that is empty while every receiver is healthy.
func (o *Operator) Breakers(ctx context.Context, db store.DBTX) (map[string][]BreakerState, error) {
	rows, err := o.q.Breakers(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("outbox: read circuit breakers: %w", err)
	}
	out := map[string][]BreakerState{}
	for _, r := range rows {
		state := status.BreakerOpen
		if r.Probing {
			state = status.BreakerProbing
		}
		out[r.Sink] = append(out[r.Sink], BreakerState{Sink: r.Sink, Key: r.DestKey, State: state, Since: r.OpenedAt,
			Reason: r.Reason, LastFailure: r.LastFailure, LastFailureAt: r.LastFailureAt, NextProbe: r.NextProbeAt, Probes: r.Probes})
	}
	return out, nil
}
