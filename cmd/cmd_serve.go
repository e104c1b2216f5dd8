package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/apidb"
	"github.com/outboxd/outboxd/server/telemetry"
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
first, as outboxd config check does, and refuses to start on any problem.

SIGHUP, or POST /-/reload with an admin token, reloads the configuration
file: validated the same way, a valid file replaces the sinks, routes and
relay settings without dropping deliveries in flight; an invalid one is
logged, problem by problem, and the running configuration stays. The
database, http and telemetry blocks need a restart.`,
		Example: `  outboxd serve --config /etc/outboxd/plugins.yaml
  OUTBOXD_HTTP_LISTEN=0.0.0.0:8080 OUTBOXD_HTTP_TOKEN=... outboxd serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context()) },
	}
}

func (a *app) serve(ctx context.Context) error {
	// From the start: SIGHUP's default is to end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
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
	// only serve uses them: what they hold is released when it returns,
	// or, once the relay runs, when each generation's relay is done with
	// them (server.run, server.swap).
	var v *server
	running := false
	defer func() {
		if running {
			return
		}
		sinks := cfg.SinkConfigs()
		if v != nil {
			v.mu.Lock()
			defer v.mu.Unlock()
			if v.current != nil {
				sinks = v.current.cfg.SinkConfigs() // a reload may have replaced cfg's
			}
		}
		closeSinks(sinks, log)
	}()
	info, _ := build()
	tel, stopTelemetry, registerGauges, err := telemetry.Serve(ctx, cfg, a.io.Env, info, pool, s.ops, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	status, reloadGauges, err := telemetry.RegisterReloadGauges(tel.MeterProvider, time.Now())
	if err != nil {
		return err
	}
	defer func() { _ = reloadGauges.Unregister() }()

	// The HTTP API's enqueues are counted with the process's meters.
	if err := s.countWith(tel.MeterProvider); err != nil {
		return err
	}
	fallback, err := routing.DBFallback(pool, s.ob.Schema())
	if err != nil {
		return err
	}
	v = &server{a: a, s: s, tel: tel, registerGauges: registerGauges, stage: fallback, status: status, log: log, failed: make(chan error, 1)}
	first, err := v.newGeneration(cfg, log)
	if err != nil {
		return err
	}
	if v.directory, err = a.followDestinations(s, log); err != nil {
		return err
	}
	if v.destinations, err = a.destinationStore(s); err != nil {
		return err
	}
	if v.portal, err = a.portalLinks(); err != nil {
		return err
	}

	// The API and the console query through a pool of their own whose
	// statements time out (http.query_timeout); the relay's pool, a copy
	// of pool made by Run, has no such limit.
	if v.apiPool, err = apidb.Open(ctx, pool, cfg.HTTP.QueryTimeout); err != nil {
		return err
	}
	defer v.apiPool.Close()
	onShutdown := func() {}
	if cfg.HTTP.UI {
		ui, err := httpapi.NewConsole(cfg, s.ops, v.apiPool, cfg.SinkConfigs(), log, v.destinations, v.portal)
		if err != nil {
			return err
		}
		v.console, onShutdown = ui, ui.Close
	}
	if err := v.install(first, log); err != nil {
		return err
	}
	stopHTTP, err := httpapi.Start(ctx, cfg.HTTP.Listen, v, log, onShutdown)
	if err != nil {
		return err
	}
	defer stopHTTP()

	log.Info("outboxd starting", "schema", s.ob.Schema(), "sinks", len(cfg.SinkConfigs()), "tracing_export", tel.Exporting, "metrics_export", tel.ExportingMetrics)
	if err := waitForDatabase(ctx, pool, s.mig, log); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the database came up
		}
		return err
	}
	checkAppliedRoutes(ctx, s, log, serveActor)
	if v.directory != nil {
		go v.directory.Run(ctx)
	}
	log.Info("relay running")
	running = true
	if err := v.run(ctx, hup); err != nil {
		return err
	}
	v.log.Info("relay drained; shutting down")
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
