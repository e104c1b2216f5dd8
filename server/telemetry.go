package server

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/server/telemetry"
)

// startTelemetry builds the providers of `outboxd serve`, adds
// telemetry.BuildInfoMetric for build to /metrics and installs the
// providers as the globals (the HTTP API's outbox counts its enqueues with
// tel.MeterProvider). Once the relay exists, registerGauges registers the
// table gauges (outbox.rows, ...) of sinks in ops's schema, reported while
// that relay leads the cluster; called again (a reload's new relay and
// sinks), it replaces the previous registration. It takes the operator
// then, since the outbox is made once the meter provider exists. The returned stop
// flushes the last export and only then unregisters the gauges, so the
// final OTLP push still carries them; call it before closing pool.
func startTelemetry(ctx context.Context, cfg *config.Config, env config.LookupEnv, build telemetry.BuildInfo, pool *pgxpool.Pool, log *slog.Logger) (tel *telemetry.Telemetry, stop func(), registerGauges func(ops *operator.Operator, r *relay.Relay, sinks []string) error, err error) {
	tel, err = telemetry.New(ctx, cfg.Telemetry, env)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := tel.ReportBuild(build); err != nil {
		return nil, nil, nil, err
	}
	// outboxd is the application here, so it installs the globals the sink
	// libraries' HTTP clients pick up.
	otel.SetTracerProvider(tel.TracerProvider)
	otel.SetMeterProvider(tel.MeterProvider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	// gauges is the current registration; a reload replaces it while
	// the HTTP API may be collecting, hence the lock.
	var (
		mu     sync.Mutex
		gauges metric.Registration
	)
	unregister := func() {
		if gauges == nil {
			return
		}
		if err := gauges.Unregister(); err != nil {
			log.Warn("telemetry: unregister gauges", telemetry.ErrAttr(err))
		}
		gauges = nil
	}
	registerGauges = func(ops *operator.Operator, r *relay.Relay, sinks []string) error {
		next, err := ops.RegisterGauges(tel.MeterProvider, pool, operator.GaugeConfig{Sinks: sinks, Relay: r})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		unregister()
		gauges = next
		return nil
	}
	return tel, func() {
		tel.Flush(ctx, log)
		mu.Lock()
		defer mu.Unlock()
		unregister()
	}, registerGauges, nil
}
