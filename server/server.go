// Package server is the server room: the daemon `outboxd serve` runs. It
// owns the daemon's lifecycle (start, wait for the database and its
// schema, run, drain and stop), its configuration generations and their
// reload (on SIGHUP and POST /-/reload), and the HTTP server on which the
// API (server/api), the operator console (server/console) and the
// telemetry (server/telemetry, /metrics) are mounted.
//
// The command line (package cmd) loads the configuration, opens the
// database and calls [Run]; everything from there until the relay has
// drained happens here.
package server

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/server/internal/apidb"
	"github.com/outboxd/outboxd/server/telemetry"
)

// Options is what the daemon starts with: what the command line loaded
// and opened, and how it reads the configuration again for a reload.
type Options struct {
	// Config is the configuration to start with, loaded as
	// config.Everything (its sinks built).
	Config *config.Config
	// Resources are what Config's sinks, and those of every configuration
	// Load reads, were built with (config.Source.Resources): Run publishes
	// the tenants' destinations there when a sink's type uses them.
	Resources *registry.Resources
	// Pool is a pool on Config's database; the caller closes it once Run
	// has returned.
	Pool *pgxpool.Pool
	// Env looks up the environment variables the daemon reads: the
	// telemetry's (OTEL_*) and destinations.EnvSecretsKey.
	Env config.LookupEnv
	// Build is this build's version, reported as outboxd_build_info.
	Build telemetry.BuildInfo
	// Hangup reloads the configuration on each signal: the process's
	// SIGHUP, which the caller subscribes to from its start (SIGHUP's
	// default is to end the process).
	Hangup <-chan os.Signal
	// Load reads the configuration file afresh for a reload, as
	// config.Everything, returning the loader's warnings; it learns the
	// file's secrets, also when it has problems.
	Load func() (*config.Config, []string, error)
	// Logger is the process's logger, scrubbing every secret learnt so
	// far.
	Logger func() (*slog.Logger, error)
	// Scrubber hides every secret learnt so far.
	Scrubber func() secret.Scrubber
	// DatabaseURL is the database URL in effect for a configured
	// database.url (the command line's flag and variables come first).
	DatabaseURL func(configured string) string
}

// Run runs the daemon until ctx is cancelled (then the relay drains its
// deliveries in flight) or the relay stops by itself: it starts
// telemetry and the HTTP API at once (so that /healthz answers and
// /readyz reports the database while Run waits for it), waits until the
// database answers and its schema is migrated, and relays, reloading the
// configuration on each Options.Hangup and POST /-/reload. It returns nil
// after a shutdown asked for by ctx, also one that came before the
// database did.
func Run(ctx context.Context, o Options) error {
	cfg, pool := o.Config, o.Pool
	log, err := o.Logger()
	if err != nil {
		return err
	}
	// The log sink and other libraries log through the default logger.
	slog.SetDefault(log)
	// Every command builds the sinks when it loads the configuration, but
	// only serve uses them: what they hold is released when it returns,
	// or, once the relay runs, when each generation's relay is done with
	// them (daemon.run, daemon.swap).
	var v *daemon
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
		CloseSinks(sinks, log)
	}()
	tel, stopTelemetry, registerGauges, err := startTelemetry(ctx, cfg, o.Env, o.Build, pool, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	status, reloadGauges, err := telemetry.RegisterReloadGauges(tel.MeterProvider, time.Now())
	if err != nil {
		return err
	}
	defer func() { _ = reloadGauges.Unregister() }()

	// The daemon's one outbox: its relays, operator, migrator, routes and
	// destinations, and the HTTP API's enqueues, counted with the
	// process's meters (hence made once they exist).
	ob, err := outboxd.New(pool, outboxd.Options{Schema: cfg.Database.Schema, MeterProvider: tel.MeterProvider})
	if err != nil {
		return err
	}
	fallback := ob.Routes().Fallback(pool)
	v = &daemon{o: o, ob: ob, tel: tel, registerGauges: registerGauges, stage: fallback, status: status, log: log, failed: make(chan error, 1)}
	// The directory first: the relay learns each destination's tenant
	// from it (shareTenants).
	if v.directory, err = followDestinations(o, ob, log); err != nil {
		return err
	}
	first, err := v.newGeneration(cfg, log)
	if err != nil {
		return err
	}
	if v.destinations, err = destinationStore(o, ob); err != nil {
		return err
	}
	if v.portal, err = PortalLinks(o.Env); err != nil {
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
		ui, err := newConsole(cfg, ob.Operator(), v.apiPool, cfg.SinkConfigs(), log, v.destinations, v.portal)
		if err != nil {
			return err
		}
		v.ui, onShutdown = ui, ui.Close
	}
	if err := v.install(first, log); err != nil {
		return err
	}
	stopHTTP, err := startHTTP(ctx, cfg.HTTP.Listen, v, log, onShutdown)
	if err != nil {
		return err
	}
	defer stopHTTP()

	log.Info("outboxd starting", "schema", ob.Schema(), "sinks", len(cfg.SinkConfigs()), "tracing_export", tel.Exporting, "metrics_export", tel.ExportingMetrics)
	if err := waitForDatabase(ctx, pool, ob.Migrator(), log); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the database came up
		}
		return err
	}
	checkAppliedRoutes(ctx, pool, ob.Routes(), cfg, log, serveActor)
	if v.directory != nil {
		go v.directory.Run(ctx)
	}
	log.Info("relay running")
	running = true
	if err := v.run(ctx); err != nil {
		return err
	}
	v.log.Info("relay drained; shutting down")
	return nil
}

// InputError is a problem of the daemon's input that its user fixes (a
// variable of its environment): the command line exits with its code for
// bad input.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }
