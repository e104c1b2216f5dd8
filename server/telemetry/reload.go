package telemetry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// The gauges of configuration reloads, named as Prometheus and
// Alertmanager name theirs (the exporter turns the dots into underscores
// and adds _seconds for the unit s): outboxd_config_last_reload_successful
// and outboxd_config_last_reload_success_timestamp_seconds.
const (
	// meterName is the instrumentation scope of outboxd serve's own gauges.
	meterName = "github.com/outboxd/outboxd/server/telemetry"

	ReloadSuccessfulMetric       = "outboxd.config.last_reload_successful"
	ReloadSuccessTimestampMetric = "outboxd.config.last_reload_success_timestamp"
)

// ReloadStatus is the outcome of the last configuration load: the one at
// start counts as the first, successful, as it does for Prometheus.
// Record it after each reload; the gauges report it.
type ReloadStatus struct {
	mu          sync.Mutex
	successful  bool
	lastSuccess time.Time
}

// Record notes a reload's outcome at now.
func (s *ReloadStatus) Record(ok bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.successful = ok
	if ok {
		s.lastSuccess = now
	}
}

// read returns the gauges' values.
func (s *ReloadStatus) read() (successful int64, lastSuccess float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.successful {
		successful = 1
	}
	return successful, float64(s.lastSuccess.UnixNano()) / float64(time.Second)
}

// RegisterReloadGauges reports status with mp as ReloadSuccessfulMetric
// (1 when the last reload applied, 0 when it kept the running
// configuration) and ReloadSuccessTimestampMetric (when the configuration
// last loaded successfully, in Unix seconds). status starts successful at
// started: the configuration serve started with.
func RegisterReloadGauges(mp metric.MeterProvider, started time.Time) (*ReloadStatus, metric.Registration, error) {
	meter := mp.Meter(meterName)
	ok, err := meter.Int64ObservableGauge(ReloadSuccessfulMetric,
		metric.WithDescription("Whether the last configuration reload succeeded (1) or kept the running configuration (0)."))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: create gauge %s: %w", ReloadSuccessfulMetric, err)
	}
	at, err := meter.Float64ObservableGauge(ReloadSuccessTimestampMetric, metric.WithUnit("s"),
		metric.WithDescription("When the configuration last loaded successfully (at start or on a reload), in Unix seconds."))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: create gauge %s: %w", ReloadSuccessTimestampMetric, err)
	}
	status := &ReloadStatus{}
	status.Record(true, started)
	reg, err := meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		successful, lastSuccess := status.read()
		obs.ObserveInt64(ok, successful)
		obs.ObserveFloat64(at, lastSuccess)
		return nil
	}, ok, at)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: register the reload gauges: %w", err)
	}
	return status, reg, nil
}
