package destinations

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// A destination's health, as its tenant reads it (Health.State): the
// status words' (package core/status).
const (
	HealthHealthy  = status.HealthHealthy
	HealthFailing  = status.HealthFailing
	HealthPaused   = status.HealthPaused
	HealthDisabled = status.HealthDisabled
)

// Bounds of what Health and Stats read.
const (
	// HealthRecentRows is how many of a destination's newest rows, on
	// each side of its history, Health looks through for its last success
	// and last failure: enough for any endpoint that is used, bounded
	// whatever its history holds.
	HealthRecentRows = 100
	// StatsWindow is the span of a destination's figures (Stats): the
	// last 24 hours, in whole minutes.
	StatsWindow = 24 * time.Hour
)

// autoDisabledPrefix starts the reason the relay records when it disables
// a destination whose circuit breaker stayed open longer than the sink's
// auto_disable_after (core/relay's disableDestination); a tenant reads
// status.AutoDisabledForTenant instead, which names no setting.
const autoDisabledPrefix = "disabled by outboxd:"

// Health is a destination's state as its receiver's answers made it, and
// when it last took a delivery and last failed one.
type Health struct {
	// State is HealthHealthy, HealthFailing, HealthPaused or
	// HealthDisabled.
	State string `json:"state"`
	// Since is when a failing destination started failing.
	Since *time.Time `json:"since,omitempty"`
	// Until is when a paused destination's deliveries resume.
	Until *time.Time `json:"until,omitempty"`
	// Reason says why it is disabled, or how it fails.
	Reason      string     `json:"reason,omitempty"`
	LastSuccess *time.Time `json:"last_success"`
	LastFailure *time.Time `json:"last_failure"`
	// LastError is the last failure's error, as its tenant may read it
	// (TenantError).
	LastError string `json:"last_error,omitempty"`
}

// Stats are a destination's figures over StatsWindow, from the per-minute
// counts every relay records (migration 033).
type Stats struct {
	// Delivered counts the deliveries its receiver accepted.
	Delivered int64 `json:"delivered"`
	// Failed counts the attempts that failed, retried or not; Dead, those
	// of them after which no attempt was left.
	Failed int64 `json:"failed"`
	Dead   int64 `json:"dead"`
	// P50Ms and P99Ms estimate the median and 99th percentile of a
	// delivery's time in flight, in milliseconds (0 with none delivered).
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// Health returns the health of d, a destination the store handed out:
// disabled (and why) when it is; failing while a circuit breaker of a sink
// delivering to it is open; paused while its receiver's Retry-After holds
// its deliveries; healthy otherwise. Its last success and last failure
// come from its HealthRecentRows newest rows (an answer with a Retry-After
// is a failure while the row it put off waits). Errors are as its tenant
// may read them (TenantError): no sink, route or internal address.
func (s *Store) Health(ctx context.Context, db DB, d Destination) (Health, error) {
	row, err := s.q.DestinationHealth(ctx, db, d.ID, HealthRecentRows)
	if err != nil {
		return Health{}, fmt.Errorf("destinations: read the health of %s: %w", d.ID, err)
	}
	return healthOf(d, row), nil
}

// healthOf is the health of d as row found it.
func healthOf(d Destination, row store.DestinationHealthRow) Health {
	h := Health{State: HealthHealthy, LastSuccess: utc(row.LastSuccess), LastFailure: utc(row.LastFailure)}
	if row.LastError != nil {
		h.LastError = TenantError(*row.LastError)
	}
	if row.BreakerLastFailureAt != nil && (h.LastFailure == nil || row.BreakerLastFailureAt.After(*h.LastFailure)) {
		// A failed probe records its failure on the breaker alone.
		h.LastFailure, h.LastError = utc(row.BreakerLastFailureAt), TenantError(*row.BreakerLastFailure)
	}
	switch {
	case !d.Enabled:
		h.State, h.Reason = HealthDisabled, TenantReason(d.DisabledReason)
	case row.BreakerOpenedAt != nil:
		h.State, h.Since, h.Reason = HealthFailing, utc(row.BreakerOpenedAt), h.LastError
	case row.RetryAfterUntil != nil:
		h.State, h.Until = HealthPaused, utc(row.RetryAfterUntil)
	}
	return h
}

// TenantReason is why a destination is disabled, as its tenant reads it:
// the reason given by whoever disabled it, and, for outboxd's own
// disabling, words that name no setting of the operator's.
func TenantReason(reason string) string {
	if strings.HasPrefix(reason, autoDisabledPrefix) {
		return status.AutoDisabledForTenant
	}
	return TenantError(reason)
}

// Stats returns the figures of destination id over StatsWindow.
func (s *Store) Stats(ctx context.Context, db DB, id string) (Stats, error) {
	row, err := s.q.DestinationStats(ctx, db, id, StatsWindow)
	if err != nil {
		return Stats{}, fmt.Errorf("destinations: read the figures of %s: %w", id, err)
	}
	ms := func(q float64) float64 {
		return float64(store.LatencyQuantile(row.LatencyBuckets, q).Microseconds()) / 1000
	}
	return Stats{Delivered: row.Sent, Failed: row.Retried + row.Dead, Dead: row.Dead, P50Ms: ms(0.5), P99Ms: ms(0.99)}, nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
