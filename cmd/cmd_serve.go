package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sethvargo/go-retry"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/console"
	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/routing"
)

// Serve timings.
const (
	// StartupRetryInitial and StartupRetryMax shape the backoff while the
	// database is unreachable or unmigrated at start.
	StartupRetryInitial = 500 * time.Millisecond
	StartupRetryMax     = 30 * time.Second
	// HTTPShutdownTimeout bounds how long in-flight API requests may take
	// to finish after SIGTERM.
	HTTPShutdownTimeout = 10 * time.Second
	// TelemetryShutdownTimeout bounds the final flush of spans.
	TelemetryShutdownTimeout = 10 * time.Second
)

func (a *app) serveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the relay and the HTTP API until SIGTERM or SIGINT, then drain",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context()) },
	}
}

func (a *app) serve(ctx context.Context) error {
	cfg, pool, ob, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	log, err := newLogger(a.logFormat, a.io.Err, a.scrub)
	if err != nil {
		return err
	}
	// The log sink and other libraries log through the default logger.
	slog.SetDefault(log)
	if err := checkListen(cfg); err != nil {
		return err
	}
	// Every command builds the sinks when it loads the configuration, but
	// only serve uses them: what they hold is released when it returns.
	defer closeSinks(cfg.sinks, log)
	tel, stopTelemetry, registerGauges, err := serveTelemetry(ctx, cfg, a.io.Env, pool, ob, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()

	rc := cfg.relayConfig()
	rc.Outbox, rc.Logger, rc.TracerProvider, rc.MeterProvider = ob, log, tel.TracerProvider, tel.MeterProvider
	// Published rows reach each sink rendered with their route's template;
	// a route this configuration lacks is rendered as the database has it.
	rc.Sinks = cfg.routes.Wrap(rc.Sinks, routing.DBFallback(pool, ob))
	relay, err := core.NewRelay(pool, rc)
	if err != nil {
		return &ConfigError{File: cfg.File, Problems: []string{err.Error()}}
	}
	if err := registerGauges(relay); err != nil {
		return err
	}

	api := &API{cfg: cfg, ob: ob, db: pool, log: log, tracing: tel.TracerProvider, meters: tel.MeterProvider, metrics: tel.Metrics}
	onShutdown := func() {}
	if cfg.HTTP.UI {
		ui, err := newConsole(cfg, ob, pool, cfg.sinks, log)
		if err != nil {
			return err
		}
		api.console, onShutdown = ui, ui.Close
	}
	stopHTTP, err := startHTTP(ctx, cfg.HTTP.Listen, api.Handler(), log, onShutdown)
	if err != nil {
		return err
	}
	defer stopHTTP()

	log.Info("outboxd starting", "schema", ob.Schema(), "sinks", len(rc.Sinks), "tracing_export", tel.Exporting, "metrics_export", tel.ExportingMetrics)
	if err := waitForDatabase(ctx, pool, ob, log); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the database came up
		}
		return err
	}
	checkAppliedRoutes(ctx, session{cfg: cfg, pool: pool, ob: ob}, log)
	log.Info("relay running")
	if err := relay.Run(ctx); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	log.Info("relay drained; shutting down")
	return nil
}

// newConsole builds the operator console of cfg.
func newConsole(cfg *Config, ob *core.Outbox, db core.DBTX, sinks []core.SinkConfig, log *slog.Logger) (*console.Console, error) {
	return console.New(console.Options{Outbox: ob, DB: db, Sinks: consoleSinks(sinks), Token: cfg.HTTP.Token,
		TraceURL: cfg.Telemetry.TraceURL, Logger: log})
}

// consoleSinks is what the console may show of the configured sinks: name,
// type and rate limit, never their options (which hold the secrets).
func consoleSinks(sinks []core.SinkConfig) []console.Sink {
	out := make([]console.Sink, 0, len(sinks))
	for _, s := range sinks {
		cs := console.Sink{Name: s.Name, Type: s.Type}
		rl := s.RateLimit
		if d, ok := s.Sink.(core.RateLimitDefaulter); ok && rl == nil {
			def := d.DefaultRateLimit() // what the relay applies, too
			rl = &def
		}
		if rl != nil {
			burst := rl.Burst
			if burst == 0 {
				burst = core.DefaultRateBurst
			}
			cs.RateLimit = fmt.Sprintf("%d per %s, burst %d", rl.Rate, rl.Per, burst)
		}
		out = append(out, cs)
	}
	return out
}

// checkListen refuses to expose the API beyond this host without a token.
func checkListen(cfg *Config) error {
	if cfg.HTTP.Token != "" || isLoopback(cfg.HTTP.Listen) {
		return nil
	}
	return &ConfigError{File: cfg.File, Problems: []string{fmt.Sprintf(
		"http.listen %s is not a loopback address: set http.token (OUTBOX_HTTP_TOKEN) so /v1/* require a bearer token", cfg.HTTP.Listen)}}
}

func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	return err == nil && isLoopbackHost(host)
}

// startHTTP listens at once, so /healthz answers and /readyz reports the
// database's state while serve waits for it, and returns a function that
// shuts the server down gracefully; onShutdown runs as the shutdown
// starts (it ends the console's live streams, which would hold it up).
func startHTTP(ctx context.Context, listen string, h http.Handler, log *slog.Logger, onShutdown func()) (func(), error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(onShutdown)
	log.Info("http api listening", "addr", ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http api stopped", errAttr(err))
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HTTPShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("http api shutdown", errAttr(err))
		}
		<-done
	}, nil
}

// waitForDatabase retries, with capped exponential backoff, until the
// database answers and its outbox schema is migrated, logging each failed
// check; /readyz fails meanwhile.
func waitForDatabase(ctx context.Context, pool *pgxpool.Pool, ob *core.Outbox, log *slog.Logger) error {
	backoff := retry.WithCappedDuration(StartupRetryMax, retry.WithJitterPercent(10, retry.NewExponential(StartupRetryInitial)))
	attempt := 0
	return retry.Do(ctx, backoff, func(ctx context.Context) error {
		attempt++
		cctx, cancel := context.WithTimeout(ctx, ReadinessTimeout)
		defer cancel()
		nr := ready(cctx, pool, ob)
		if nr == nil {
			if attempt > 1 {
				log.Info("database ready", "attempts", attempt)
			}
			return nil
		}
		log.Warn("waiting for the database; retrying with backoff", "attempt", attempt, errAttr(nr))
		return retry.RetryableError(nr)
	})
}

// closeSinks releases what sinks hold (a broker sink's connection) once the
// relay is done with them: every sink that implements io.Closer is closed.
func closeSinks(sinks []core.SinkConfig, log *slog.Logger) {
	for _, s := range sinks {
		if c, ok := s.Sink.(io.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("closing a sink failed", "sink", s.Name, errAttr(err))
			}
		}
	}
}
