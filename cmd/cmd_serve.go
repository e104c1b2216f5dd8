package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/apidb"
	"github.com/outboxd/outboxd/internal/httpapi"
	"github.com/outboxd/outboxd/internal/telemetry"
	"github.com/outboxd/outboxd/routing"
)

// startupRetryInitial and startupRetryMax shape the backoff while the
// database is unreachable or unmigrated at start.
const (
	startupRetryInitial = 500 * time.Millisecond
	startupRetryMax     = 30 * time.Second
)

func (a *app) serveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the relay and the HTTP API until SIGTERM or SIGINT, then drain",
		Long: `Runs the relay and the HTTP API (and the console) until SIGTERM or SIGINT,
then drains the deliveries in flight. It validates the whole configuration
first, as outboxd config check does, and refuses to start on any problem.`,
		Example: `  outboxd serve --config /etc/outboxd/plugins.yaml
  OUTBOXD_HTTP_LISTEN=0.0.0.0:8080 OUTBOXD_HTTP_TOKEN=... outboxd serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context()) },
	}
}

func (a *app) serve(ctx context.Context) error {
	s, err := a.connect(ctx, config.Everything)
	if err != nil {
		return err
	}
	defer s.pool.Close()
	cfg, pool := s.cfg, s.pool
	log, err := a.logger()
	if err != nil {
		return err
	}
	// The log sink and other libraries log through the default logger.
	slog.SetDefault(log)
	if err := serveProblems(cfg); err != nil {
		return err
	}
	// Every command builds the sinks when it loads the configuration, but
	// only serve uses them: what they hold is released when it returns.
	defer closeSinks(cfg.SinkConfigs(), log)
	info, _ := build()
	tel, stopTelemetry, registerGauges, err := telemetry.Serve(ctx, cfg, a.io.Env, info, pool, s.ops, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()

	// The HTTP API's enqueues are counted with the process's meters.
	if err := s.countWith(tel.MeterProvider); err != nil {
		return err
	}
	rc := cfg.RelayConfig()
	rc.Schema, rc.Logger, rc.TracerProvider, rc.MeterProvider = s.ob.Schema(), log, tel.TracerProvider, tel.MeterProvider
	rc.Redact = a.scrub.String // delivery errors, in rows and spans, lose the configuration's secrets
	// Published rows reach each sink rendered with their route's template;
	// a route this configuration lacks is rendered as the database has it.
	fallback, err := routing.DBFallback(pool, s.ob.Schema())
	if err != nil {
		return err
	}
	rc.Stage = cfg.RouteTable().Stage(fallback)
	relay, err := relay.New(pool, rc)
	if err != nil {
		return &config.Error{File: cfg.File, Problems: []string{err.Error()}}
	}
	if err := registerGauges(relay); err != nil {
		return err
	}
	followDestinations, err := a.followDestinations(s, log)
	if err != nil {
		return err
	}
	dst, err := a.destinationStore(s)
	if err != nil {
		return err
	}

	// The API and the console query through a pool of their own whose
	// statements time out (http.query_timeout); the relay's pool, a copy
	// of pool made by Run, has no such limit.
	apiPool, err := apidb.Open(ctx, pool, cfg.HTTP.QueryTimeout)
	if err != nil {
		return err
	}
	defer apiPool.Close()
	api := &httpapi.API{Config: cfg, Outbox: s.ob, Operator: s.ops, Migrator: s.mig, DB: apiPool, Log: log, Tracing: tel.TracerProvider, Meters: tel.MeterProvider, Metrics: tel.Metrics, Destinations: dst}
	onShutdown := func() {}
	if cfg.HTTP.UI {
		ui, err := httpapi.NewConsole(cfg, s.ops, apiPool, cfg.SinkConfigs(), log)
		if err != nil {
			return err
		}
		api.Console, onShutdown = ui, ui.Close
	}
	stopHTTP, err := httpapi.Start(ctx, cfg.HTTP.Listen, api.Handler(), log, onShutdown)
	if err != nil {
		return err
	}
	defer stopHTTP()

	log.Info("outboxd starting", "schema", s.ob.Schema(), "sinks", len(rc.Sinks), "tracing_export", tel.Exporting, "metrics_export", tel.ExportingMetrics)
	if err := waitForDatabase(ctx, pool, s.mig, log); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the database came up
		}
		return err
	}
	checkAppliedRoutes(ctx, s, log)
	if followDestinations != nil {
		go followDestinations(ctx)
	}
	log.Info("relay running")
	if err := relay.Run(ctx); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	log.Info("relay drained; shutting down")
	return nil
}

// serveProblems are the rules serve enforces beyond loading the
// configuration; config check applies them too, so that a configuration it
// passes is one serve starts with. It refuses to expose the API beyond
// this host without a token or a trusted proxy.
func serveProblems(cfg *config.Config) error {
	if cfg.HTTP.Authenticates() || httpapi.IsLoopback(cfg.HTTP.Listen) {
		return nil
	}
	return &config.Error{File: cfg.File, Problems: []string{fmt.Sprintf(
		"http.listen %s is not a loopback address: set http.token (OUTBOXD_HTTP_TOKEN), http.tokens or http.trusted_proxy so /v1/* require a bearer token", cfg.HTTP.Listen)}}
}

// waitForDatabase retries, with capped exponential backoff, until the
// database answers and its outbox schema is migrated, logging each failed
// check; /readyz fails meanwhile.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, m *migrate.Migrator, log *slog.Logger) error {
	backoff := retry.WithCappedDuration(startupRetryMax, retry.WithJitterPercent(10, retry.NewExponential(startupRetryInitial)))
	attempt := 0
	return retry.Do(ctx, backoff, func(ctx context.Context) error {
		attempt++
		cctx, cancel := context.WithTimeout(ctx, httpapi.ReadinessTimeout)
		defer cancel()
		nr := httpapi.Ready(cctx, pool, m)
		if nr == nil {
			if attempt > 1 {
				log.Info("database ready", "attempts", attempt)
			}
			return nil
		}
		log.Warn("waiting for the database; retrying with backoff", "attempt", attempt, telemetry.ErrAttr(nr))
		return retry.RetryableError(nr)
	})
}

// closeSinks releases what sinks hold (a broker sink's connection) once the
// relay is done with them: every sink that implements io.Closer is closed.
func closeSinks(sinks []relay.SinkConfig, log *slog.Logger) {
	for _, s := range sinks {
		if c, ok := s.Sink.(io.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("closing a sink failed", "sink", s.Name, telemetry.ErrAttr(err))
			}
		}
	}
}
