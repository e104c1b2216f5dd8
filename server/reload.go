package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/server/api"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/portal"
	"github.com/outboxd/outboxd/server/telemetry"
)

// sighupActor is who reloads the configuration on SIGHUP: whoever may
// signal the process, which is the operator of the host.
var sighupActor = audit.Actor{Name: "outboxd serve", Role: string(access.RoleAdmin), Source: "SIGHUP"}

// errStopping refuses a reload asked for while serve stops.
var errStopping = errors.New("reload: serve is stopping")

// generation is one configuration at work: its relay and the sinks it
// delivers to. A reload starts a new generation, then retires the old
// one, whose relay drains its deliveries in flight before its sinks close.
type generation struct {
	cfg   *config.Config
	relay *relay.Relay
	log   *slog.Logger
	stop  context.CancelFunc
	done  chan struct{} // closed when relay.Run returned
	// retired says the relay was stopped by a reload: its stop is no
	// failure of serve.
	retired atomic.Bool
}

// daemon is serve once it has started: what every generation shares (the
// pool, the telemetry, the API's pool and console), the running
// generation, and the HTTP handler of its configuration.
type daemon struct {
	o              Options // the configuration serve started with, its pool, and how to reload
	ob             *outboxd.Outbox
	tel            *telemetry.Telemetry
	registerGauges func(*operator.Operator, *relay.Relay, []string) error
	stage          routing.Fallback
	apiPool        *pgxpool.Pool
	// ui is the console (and the tenants' portal); nil when http.ui is
	// off.
	ui     *console.Console
	status *telemetry.ReloadStatus
	// destinations is the API's store of tenants' destinations; directory,
	// when a sink's type uses them, what the sinks read them from,
	// published in Options.Resources (for a reloaded configuration's sinks
	// too).
	destinations *destinations.Store
	directory    *destinations.Directory
	// portal signs the tenant portal's links; nil without
	// destinations.EnvSecretsKey.
	portal *portal.Links

	mu      sync.Mutex // serialises reloads
	log     *slog.Logger
	current *generation
	runCtx  context.Context // what relays run under; nil until run starts the first
	handler atomic.Pointer[http.Handler]
	failed  chan error // a relay that stopped by itself
	retired sync.WaitGroup
}

// ServeHTTP serves the API of the running configuration.
func (v *daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*v.handler.Load()).ServeHTTP(w, r)
}

// newGeneration builds the relay of cfg, ready to run, with the logger
// log.
func (v *daemon) newGeneration(cfg *config.Config, log *slog.Logger) (*generation, error) {
	rc := cfg.RelayConfig()
	shareTenants(&rc, cfg, v.directory)
	rc.Logger, rc.TracerProvider, rc.MeterProvider = log, v.tel.TracerProvider, v.tel.MeterProvider
	rc.Redact = v.o.Scrubber().String // delivery errors, in rows and spans, lose the configuration's secrets
	// Published rows reach each sink rendered with their route's template;
	// a route this configuration lacks is rendered as the database has it.
	rc.Stage = cfg.RouteTable().Stage(v.stage)
	r, err := v.ob.NewRelay(rc)
	if err != nil {
		return nil, &config.Error{File: cfg.File, Problems: []string{err.Error()}}
	}
	return &generation{cfg: cfg, relay: r, log: log, done: make(chan struct{})}, nil
}

// install makes g the running generation: its gauges are reported and
// the API serves its configuration.
func (v *daemon) install(g *generation, log *slog.Logger) error {
	if err := v.registerGauges(v.ob.Operator(), g.relay, slices.Sorted(maps.Keys(g.cfg.Sinks))); err != nil {
		return err
	}
	// The console, the portal and the API's store follow the
	// configuration the relay now delivers under.
	followConfig(v.destinations, g.cfg)
	var ui http.Handler
	if v.ui != nil {
		v.ui.Reconfigure(consoleSinks(g.cfg.SinkConfigs()), g.cfg.TestEventSink(), g.cfg.EventTypes())
		ui = v.ui
	}
	served := &api.API{Config: g.cfg, Outbox: v.ob, Operator: v.ob.Operator(), Migrator: v.ob.Migrator(), DB: v.apiPool, Log: log,
		Tracing: v.tel.TracerProvider, Meters: v.tel.MeterProvider, Reload: v.reload,
		Destinations: v.destinations, Portal: v.portal}
	h := newMux(served, v.tel.Metrics, ui)
	v.handler.Store(&h)
	v.current, v.log = g, log
	return nil
}

// start runs g's relay until it is retired or serve stops. A relay that
// stops by itself (see relay.Run) stops serve through v.failed, unless a
// reload retired it meanwhile.
func (v *daemon) start(g *generation) {
	ctx, stop := context.WithCancel(v.runCtx)
	g.stop = stop
	go func() {
		defer close(g.done)
		err := g.relay.Run(ctx)
		switch {
		case err != nil && !g.retired.Load():
			select {
			case v.failed <- err:
			default: // serve is stopping already
			}
		case err != nil:
			g.log.Error("the relay of the previous configuration stopped with an error while draining", telemetry.ErrAttr(err))
		}
	}()
}

// run runs the first generation and reloads on each signal of
// Options.Hangup until ctx is cancelled (then every relay drains) or a
// relay fails.
func (v *daemon) run(ctx context.Context) error {
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	v.mu.Lock()
	v.runCtx = runCtx
	v.start(v.current)
	v.mu.Unlock()
	var failure error
	for failure == nil && ctx.Err() == nil {
		select {
		case <-v.o.Hangup:
			_ = v.reload(ctx, sighupActor) // it logs its outcome
		case err := <-v.failed:
			failure = fmt.Errorf("relay: %w", err)
		case <-ctx.Done():
		}
	}
	stopAll()
	v.mu.Lock()
	last := v.current
	v.mu.Unlock()
	<-last.done
	v.retired.Wait()
	CloseSinks(last.cfg.SinkConfigs(), v.log)
	return failure
}

// reload loads the configuration file again, validating it as serve does
// at start, and on success runs it in place of the running one: the new
// relay starts, the API serves the new sinks, routes are handled as at
// start (applied when none are; a warning when the database's differ),
// the reload is audited as actor's, and then the old relay drains (its
// deliveries in flight finish, its claims keep their leases meanwhile:
// claims skip locked rows, so both relays run side by side safely) and
// its sinks close. On any problem the running configuration stays and
// every problem is logged. Either way the reload gauges record it.
func (v *daemon) reload(ctx context.Context, actor audit.Actor) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.runCtx != nil && v.runCtx.Err() != nil {
		return errStopping
	}
	// Once the new relay runs, the reload is done: a client that hangs
	// up does not cut off its routes check or its audit entry.
	err := v.swap(context.WithoutCancel(ctx), actor)
	v.status.Record(err == nil, time.Now())
	if err != nil {
		v.logRefused(v.scrubbedLogger(), actor, err)
		return v.o.Scrubber().Error(err)
	}
	return nil
}

// scrubbedLogger is a logger that scrubs every secret loaded so far, the
// file just read included.
func (v *daemon) scrubbedLogger() *slog.Logger {
	if log, err := v.o.Logger(); err == nil {
		return log
	}
	return v.log // the flags were checked at start: not reached
}

// swap does reload's work under its lock.
func (v *daemon) swap(ctx context.Context, actor audit.Actor) error {
	cfg, warnings, err := v.o.Load()
	log := v.scrubbedLogger() // the new configuration's secrets are known now
	for _, w := range warnings {
		log.Warn("reload: " + w)
	}
	if err != nil {
		return err
	}
	old := v.current
	keepRestartOnly(cfg, old.cfg, v.o.DatabaseURL, log)
	g, err := v.newGeneration(cfg, log)
	if err != nil {
		CloseSinks(cfg.SinkConfigs(), log)
		return err
	}
	if err := v.install(g, log); err != nil {
		CloseSinks(cfg.SinkConfigs(), log)
		return fmt.Errorf("reload: %w", err)
	}
	slog.SetDefault(log)
	if v.runCtx == nil {
		// Still waiting for the database: run starts the new relay.
		CloseSinks(old.cfg.SinkConfigs(), log)
	} else {
		v.start(g)
		old.retired.Store(true)
		old.stop()
		v.retired.Go(func() {
			<-old.done
			CloseSinks(old.cfg.SinkConfigs(), log)
			log.Info("reload: the previous configuration's relay drained its deliveries in flight")
		})
	}

	checkAppliedRoutes(ctx, v.o.Pool, v.ob.Routes(), cfg, log, actor)
	added, removed := sinkChanges(old.cfg, cfg)
	err = v.ob.Audit().Write(ctx, v.o.Pool, actor, audit.Record{Action: audit.ActionConfigReload, Count: int64(len(cfg.Sinks)),
		Detail: map[string]any{"file": cfg.File, "sinks_added": added, "sinks_removed": removed}})
	if err != nil {
		// The new configuration runs: the reload is done, its record lost.
		log.Warn("reload: could not audit the reload", telemetry.ErrAttr(err))
	}
	log.Info("configuration reloaded", "file", config.DescribeFile(cfg.File), "sinks", len(cfg.Sinks),
		"sinks_added", added, "sinks_removed", removed, "actor", actor.Name, "source", actor.Source)
	return nil
}

// logRefused logs a refused reload, each problem on its own record (a
// config.Error's problems name their key, file and line).
func (v *daemon) logRefused(log *slog.Logger, actor audit.Actor, err error) {
	const msg = "reload refused: the running configuration stays"
	var ce *config.Error
	if !errors.As(err, &ce) {
		log.Error(msg, "actor", actor.Name, "source", actor.Source, telemetry.ErrAttr(err))
		return
	}
	for _, p := range ce.Problems {
		log.Error(msg, "file", config.DescribeFile(ce.File), "problem", p, "problems", len(ce.Problems),
			"actor", actor.Name, "source", actor.Source)
	}
}

// keepRestartOnly gives cfg the settings of running that a reload cannot
// change, logging those the file changed: the database (its pools are
// open), the http block (the listener, its tokens and the console
// sign-in are set up once) and the telemetry block (its exporters).
func keepRestartOnly(cfg, running *config.Config, databaseURL func(configured string) string, log *slog.Logger) {
	var changed []string
	if databaseURL(cfg.Database.URL) != databaseURL(running.Database.URL) {
		changed = append(changed, "database.url")
	}
	if cfg.Database.Schema != running.Database.Schema {
		changed = append(changed, "database.schema")
	}
	if !httpEqual(cfg.HTTP, running.HTTP) {
		changed = append(changed, "http")
	}
	if cfg.Telemetry != running.Telemetry {
		changed = append(changed, "telemetry")
	}
	if len(changed) > 0 {
		log.Warn("reload: these settings changed in the file but need a restart; the running values stay", "settings", changed)
	}
	cfg.Database, cfg.HTTP, cfg.Telemetry = running.Database, running.HTTP, running.Telemetry
}

// httpEqual compares two http blocks (tokens by name, role and secret).
func httpEqual(x, y config.HTTPConfig) bool {
	return x.Listen == y.Listen && x.Token == y.Token && slices.Equal(x.Tokens, y.Tokens) &&
		proxyEqual(x.TrustedProxy, y.TrustedProxy) && slices.Equal(x.AllowedHosts, y.AllowedHosts) &&
		x.UI == y.UI && x.QueryTimeout == y.QueryTimeout
}

// proxyEqual compares two trusted_proxy blocks, either absent (nil).
func proxyEqual(x, y *config.TrustedProxySpec) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.UserHeader == y.UserHeader && x.RoleHeader == y.RoleHeader && x.DefaultRole == y.DefaultRole &&
		slices.Equal(x.Sources, y.Sources)
}

// sinkChanges lists the sinks next adds to and removes from prev.
func sinkChanges(prev, next *config.Config) (added, removed []string) {
	for name := range next.Sinks {
		if _, ok := prev.Sinks[name]; !ok {
			added = append(added, name)
		}
	}
	for name := range prev.Sinks {
		if _, ok := next.Sinks[name]; !ok {
			removed = append(removed, name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}
