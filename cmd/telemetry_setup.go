package cmd

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/outboxd/outboxd/core"
)

// serveTelemetry builds the providers of `outboxd serve`, installs them as
// the globals and counts ob's enqueues (the HTTP API's) with them. Once the
// relay exists, registerGauges registers the table gauges (outbox.rows,
// ...) of the configured sinks, reported while that relay computes the
// cluster's counts. The returned stop flushes the last export and only
// then unregisters the gauges, so the final OTLP push still carries them;
// call it before closing pool.
func serveTelemetry(ctx context.Context, cfg *Config, env LookupEnv, pool *pgxpool.Pool, ob *core.Outbox, log *slog.Logger) (tel *Telemetry, stop func(), registerGauges func(*core.Relay) error, err error) {
	tel, err = NewTelemetry(ctx, cfg.Telemetry, env)
	if err != nil {
		return nil, nil, nil, err
	}
	// outboxd is the application here, so it installs the globals the sink
	// libraries' HTTP clients pick up.
	otel.SetTracerProvider(tel.TracerProvider)
	otel.SetMeterProvider(tel.MeterProvider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	ob.MeterProvider = tel.MeterProvider

	var gauges metric.Registration
	registerGauges = func(relay *core.Relay) error {
		gauges, err = ob.RegisterGauges(tel.MeterProvider, pool, core.GaugeConfig{Sinks: slices.Sorted(maps.Keys(cfg.Sinks)), Relay: relay})
		return err
	}
	return tel, func() {
		shutdownTelemetry(ctx, tel, log)
		if gauges == nil {
			return
		}
		if err := gauges.Unregister(); err != nil {
			log.Warn("telemetry: unregister gauges", errAttr(err))
		}
	}, registerGauges, nil
}

// shutdownTelemetry flushes spans and metrics, waiting at most
// TelemetryShutdownTimeout for the collector, even once ctx is cancelled.
func shutdownTelemetry(ctx context.Context, tel *Telemetry, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TelemetryShutdownTimeout)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		log.Warn("telemetry shutdown", errAttr(err))
	}
}

// countEnqueues gives the CLI's outbox a meter provider, so that the
// outbox.enqueues of `outboxd enqueue` (a backfill, say) reach the OTLP
// collector when one is configured; they are pushed when the returned stop
// runs, as the command ends. Without an endpoint nothing leaves the
// process.
func (a *app) countEnqueues(ctx context.Context, s session) (func(), error) {
	log, err := newLogger(a.logFormat, a.io.Err, a.scrub)
	if err != nil {
		return nil, err
	}
	tel, err := NewTelemetry(ctx, s.cfg.Telemetry, a.io.Env)
	if err != nil {
		return nil, err
	}
	s.ob.MeterProvider = tel.MeterProvider
	return func() { shutdownTelemetry(ctx, tel, log) }, nil
}
