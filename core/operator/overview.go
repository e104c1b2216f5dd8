package operator

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/outboxd/outboxd/internal/store"
)

// SinkOverview is what an operator wants to know about one sink at a
// glance.
type SinkOverview struct {
	Sink string
	// Counts are from the cluster's last snapshot.
	Counts SinkCounts
	// Rate is the sink's deliveries over the overview's window.
	Rate DeliveryRate
	// State is its pause, if any, and the last pause or resume by hand.
	State SinkState
	// Breakers are its open circuit breakers (the sink's or its keys').
	Breakers []BreakerState
}

// Stalled reports whether rows of the sink have waited longer than window
// while no relay attempted a single delivery to it, and it is not paused:
// no running relay has the sink, or its deliveries hang.
func (s SinkOverview) Stalled(window time.Duration) bool {
	attempts := s.Rate.Sent + s.Rate.Retried + s.Rate.Dead
	return s.Counts.Pending > 0 && s.Counts.OldestPendingAge > window && attempts == 0 && !s.State.Paused() && len(s.Breakers) == 0
}

// Overview is the state of every sink that has rows, deliveries or a
// pause: counts, delivery rate and latency, and pauses.
type Overview struct {
	// Sinks are sorted by name.
	Sinks []SinkOverview
	// TakenAt is when the counts were computed (zero before the first
	// snapshot); Window is the span of the rates.
	TakenAt time.Time
	Window  time.Duration
}

// Overview reads the cluster's last row counts, the delivery rates of the
// last window (0 means DefaultRateWindow) and the sinks' pauses. It reads
// four small tables, never the messages: its cost does not grow with the
// outbox, so it can be polled.
func (o *Operator) Overview(ctx context.Context, db store.DBTX, window time.Duration) (Overview, error) {
	if window <= 0 {
		window = DefaultRateWindow
	}
	snap, err := o.StatsSnapshot(ctx, db)
	if err != nil {
		return Overview{}, err
	}
	rates, err := o.DeliveryRates(ctx, db, window)
	if err != nil {
		return Overview{}, err
	}
	states, err := o.SinkStates(ctx, db)
	if err != nil {
		return Overview{}, err
	}
	breakers, err := o.Breakers(ctx, db)
	if err != nil {
		return Overview{}, err
	}
	names := map[string]bool{}
	for _, m := range []map[string]bool{keys(snap.Sinks), keys(rates), keys(states), keys(breakers)} {
		maps.Copy(names, m)
	}
	ov := Overview{TakenAt: snap.TakenAt, Window: window}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		state := states[name]
		state.Sink = name
		ov.Sinks = append(ov.Sinks, SinkOverview{Sink: name, Counts: snap.Sinks[name], Rate: rates[name], State: state,
			Breakers: breakers[name]})
	}
	return ov, nil
}

// keys is the set of m's keys.
func keys[V any](m map[string]V) map[string]bool {
	set := make(map[string]bool, len(m))
	for k := range m {
		set[k] = true
	}
	return set
}
