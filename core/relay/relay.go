package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/internal/failurelog"
	"github.com/outboxd/outboxd/core/internal/listener"
	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/core/internal/ratelimit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/otelscope"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/store"
)

// shutdownAbandonAfter is how long Run still waits, after cancelling the
// deliveries at the shutdown timeout, before it abandons sinks that ignore
// their context.
const shutdownAbandonAfter = 5 * time.Second

// Relay claims rows from an outbox and delivers them to their sinks. Run one
// in every process; relays coordinate through PostgreSQL alone. A relay
// claims only rows of the sinks it is configured with: rows of any other
// sink wait, untouched, for a relay that has it.
//
// Sinks without a rate limit or an in-flight bound of their own share one
// claim loop (one statement claims a batch across them, see
// loop_shared.go). A sink with a rate limit or a max_in_flight below the
// relay's concurrency gets its own claim loop (loop_sink.go), which claims
// only as many rows as it can start soon, so throttled rows never wait in
// the relay while their lease runs out.
type Relay struct {
	pool    *pgxpool.Pool // the application's; Run opens the relay's own from it
	cfg     Config
	sinks   map[string]SinkConfig
	q       *store.Queries
	ops     *operator.Operator // the stats snapshot, the unconfigured sinks, the audit trail
	id      string             // see ID
	logger  *slog.Logger
	tracer  trace.Tracer
	metrics *relayMetrics
	// labels are each sink's metric attribute sets by sink name.
	labels map[string]*sinkLabels
	// breakers are the circuit breakers of the sinks that have them on
	// (see breaker.go); breakerKick makes the breaker watch act on them.
	breakers    map[string]*sinkBreakers
	breakerKick chan struct{}
	// fallbacks are Config.Fallbacks by the target each stands in for,
	// standIns by the target that stands in (see fallback.go).
	fallbacks, standIns map[fallbackKey]Fallback
	// failures logs streaks of failed attempts per receiver (see
	// package failurelog).
	failures *failurelog.Log
	// claimBuffers are slices for the store's claimed rows (*[]ClaimRow),
	// reused from one claim to the next: a claim loop claims again and
	// again, and its rows are copied out of the slice at once.
	claimBuffers sync.Pool
	// keyFlight counts the deliveries under way per rate key of
	// the per-key sinks (see keyShareOfSlots).
	keyFlight keysInFlight

	ran atomic.Bool // Run may be called once

	// What one Run works with; set before its loops start.
	db         *pgxpool.Pool // claims and terminal writes go through it
	limiter    *ratelimit.Limiter
	completer  *completer.Completer
	listener   *listener.Listener
	signals    *relaysignal.Relay // nil outside tests
	fail       func(error)        // stops the run; Run returns the error
	deliveries sync.WaitGroup     // in-flight deliveries, for a bounded drain
	// minutes counts the written outcomes for delivery_minutes.
	minutes *maintenance.DeliveryMinutes
}

// New checks cfg and returns a relay of q's outbox schema that will
// connect with pool's configuration, and asks ops for the stats snapshot,
// the unconfigured sinks and the audit trail. Programs make their relays
// with the front door (outboxd.Outbox.NewRelay), which hands every relay
// the one store and operator its engine shares.
//
// New opens nothing: Run does (a pool of its own, configured like pool but
// for its session settings, see openPool), and releases what it opened
// before it returns, so a relay that is never run costs nothing. Unless
// Config.DurableRelayWrites is set, the relay's commits do not wait for the
// WAL flush; the application's pool, and so its enqueues, stay durable.
func New(pool *pgxpool.Pool, q *store.Queries, ops *operator.Operator, cfg Config) (*Relay, error) {
	cfg, sinks, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	r := &Relay{
		pool:   pool,
		cfg:    cfg,
		sinks:  sinks,
		q:      q,
		ops:    ops,
		id:     newRelayID(),
		logger: cfg.Logger,
		tracer: tp.Tracer(otelscope.Name),
		labels: make(map[string]*sinkLabels, len(sinks)),

		breakers:    newBreakers(sinks),
		breakerKick: make(chan struct{}, 1),
	}
	r.fallbacks, r.standIns = fallbacksOf(cfg.Fallbacks)
	r.failures = failurelog.New(cfg.Logger, func(err error) string { return *r.storedError(err) }, time.Now)
	if r.metrics, err = newRelayMetrics(cfg.MeterProvider); err != nil {
		return nil, err
	}
	for name, s := range sinks {
		r.labels[name] = newSinkLabels(s)
	}
	return r, nil
}

// errRelayFailed is wrapped by Run's error when the relay stops for a
// reason other than its context.
var errRelayFailed = errors.New("relay stopped")

// Run relays until ctx is cancelled, then stops claiming, lets in-flight
// deliveries finish (bounded by Config.ShutdownTimeout), writes their
// outcomes and returns nil. It returns an error when it stops for any other
// reason: claims fail with an error retrying cannot fix (the outbox schema
// is gone, the database is read-only after a failover, access was
// revoked), a claim loop panicked, its connection pool cannot be opened, or
// Run was called before. In-flight deliveries are drained then too. A
// Relay runs once.
func (r *Relay) Run(ctx context.Context) error {
	if r.ran.Swap(true) {
		return errors.New("outbox: Relay.Run called twice; make a new Relay")
	}
	db, err := r.openPool()
	if err != nil {
		return err
	}
	defer db.Close()
	r.db = db
	r.signals = relaysignal.FromContext(ctx)
	r.limiter = ratelimit.New(db, r.q)
	r.completer = completer.New(db, r.q, r.cfg.DeleteOnSent, r.logger, r.cfg.BatchSize)
	r.listener = listener.New(db, r.q.Channel, r.logger, func() { r.refreshPauses(context.Background()) })
	r.refreshPauses(ctx)

	// The loops stop with ctx, or when one of them fails (see fail).
	loopCtx, stopLoops := context.WithCancelCause(ctx)
	defer stopLoops(nil)
	r.fail = func(err error) {
		r.logger.Error("outbox: the relay stops: " + err.Error())
		stopLoops(fmt.Errorf("%w: %w", errRelayFailed, err))
	}
	// Deliveries and their terminal writes outlive ctx for the drain; this
	// context cuts them off when the drain takes too long.
	deliverCtx, abortDeliveries := context.WithCancel(context.WithoutCancel(ctx))
	defer abortDeliveries()

	services := r.startServices(ctx, loopCtx, deliverCtx)
	var background sync.WaitGroup
	background.Go(func() { r.rereadPauses(loopCtx) })
	background.Go(func() { r.sweepFallbacks(loopCtx) })
	completerDone := make(chan struct{})
	go func() { r.completer.Run(); close(completerDone) }()

	var loops sync.WaitGroup
	waiters := r.startLoops(loopCtx, deliverCtx, &loops)
	// Started after the loops subscribed: its first LISTEN covers them all.
	background.Go(func() { r.listener.Run(loopCtx) })
	loops.Wait()
	r.unregister(waiters)

	r.drain(abortDeliveries)
	r.completer.Stop()
	<-completerDone
	background.Wait()
	for _, s := range services {
		s.Stop()
	}
	if cause := context.Cause(loopCtx); errors.Is(cause, errRelayFailed) {
		return fmt.Errorf("outbox: %w", cause)
	}
	return nil
}

// startServices starts the relay's services (package maintenance) and
// returns them in the order to stop them: the leader and its chores, the
// unconfigured sinks' watch, and the breaker watch (its probes delivered
// in deliverCtx), run until loopCtx ends; the delivery
// counts run until stopped, last, after the drain's outcomes are written,
// so they count those too.
func (r *Relay) startServices(ctx, loopCtx, deliverCtx context.Context) []maintenance.Service {
	env := maintenance.Env{DB: r.db, Q: r.q, Logger: r.logger, Signals: r.signals}
	leader := maintenance.NewLeader(env, r.id, r.cfg.StatsInterval)
	r.minutes = maintenance.NewDeliveryMinutes(env, slices.Collect(maps.Keys(r.sinks)), r.cfg.StatsInterval)
	services := []maintenance.Service{
		leader,
		maintenance.NewStatsSnapshot(env, r.ops, leader, r.cfg.StatsInterval),
		maintenance.NewHistory(env, leader, r.cfg.MaintenanceInterval, r.cfg.SentRetention),
		maintenance.NewMaintenance(env, leader, maintenance.MaintenanceConfig{Interval: r.cfg.MaintenanceInterval,
			SentRetention: r.cfg.SentRetention, ThreadRetention: r.cfg.ThreadRetention, WaiterPruneAfter: waiterPruneAfter}),
		maintenance.NewUnconfigured(env, r.ops, slices.Collect(maps.Keys(r.sinks)), meterProvider(r.cfg.MeterProvider)),
	}
	if len(r.breakers) > 0 {
		services = append(services, maintenance.NewBreakerWatch(env, watchedBreakers{r, deliverCtx}, r.cfg.PollInterval, r.breakerKick))
	}
	for _, s := range services {
		s.Start(loopCtx)
	}
	r.minutes.Start(context.WithoutCancel(ctx))
	return append(services, r.minutes)
}

// startLoops starts a claim loop for every throttled sink and one shared by
// the others, each in loops and with a wake-up registration of its own,
// which it returns. A loop that panics stops the relay (see fail).
func (r *Relay) startLoops(ctx, deliverCtx context.Context, loops *sync.WaitGroup) []*waiter {
	var shared []string // sinks without a claim loop of their own
	var waiters []*waiter
	start := func(sinks []string, loop func(w *waiter)) {
		w := r.newWaiter(sinks)
		waiters = append(waiters, w)
		loops.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					r.fail(fmt.Errorf("a claim loop panicked: %v", p))
				}
			}()
			defer w.lookoutRunning.Wait()
			loop(w)
		})
	}
	for _, s := range r.sinks {
		if s.digests() {
			start([]string{s.Name}, func(w *waiter) { r.digestLoop(ctx, deliverCtx, s, w) })
			continue
		}
		if !r.throttled(s) {
			shared = append(shared, s.Name)
			continue
		}
		start([]string{s.Name}, func(w *waiter) { r.sinkLoop(ctx, deliverCtx, s, w) })
	}
	if len(shared) > 0 {
		start(shared, func(w *waiter) { r.sharedLoop(ctx, deliverCtx, w) })
	}
	return waiters
}

// openPool returns the pool the relay claims and writes through: a copy of
// the application's whose connections have the settings its statements'
// plans are written for (store.RelaySession: no JIT, no sequential or
// bitmap scan where an index serves) and, unless DurableRelayWrites, whose commits do
// not wait for the WAL flush. Each connection it opens is warmed first
// (warmConnection), after the application's AfterConnect, and it opens
// relayMinConns of them as it starts and keeps them.
func (r *Relay) openPool() (*pgxpool.Pool, error) {
	pc := r.pool.Config()
	maps.Copy(pc.ConnConfig.RuntimeParams, store.RelaySession())
	if !r.cfg.DurableRelayWrites {
		pc.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	pc.MinConns = max(pc.MinConns, min(pc.MaxConns, relayMinConns))
	appConnect := pc.AfterConnect
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if appConnect != nil {
			if err := appConnect(ctx, conn); err != nil {
				return err
			}
		}
		r.warmConnection(ctx, conn)
		return nil
	}
	db, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("outbox: relay pool: %w", err)
	}
	return db, nil
}

// drain waits for in-flight deliveries, for at most the shutdown timeout;
// then it cancels them and gives sinks that ignore cancellation a little
// longer before abandoning them (their rows return at lease expiry).
func (r *Relay) drain(abortDeliveries context.CancelFunc) {
	drained := make(chan struct{})
	go func() { r.deliveries.Wait(); close(drained) }()
	select {
	case <-drained:
		return
	case <-time.After(r.cfg.ShutdownTimeout):
	}
	r.logger.Warn("outbox: shutdown timeout; cancelling in-flight deliveries", "timeout", r.cfg.ShutdownTimeout)
	abortDeliveries()
	select {
	case <-drained:
	case <-time.After(shutdownAbandonAfter):
		r.logger.Warn("outbox: abandoning deliveries whose sinks ignore cancellation; their rows return at lease expiry")
	}
}

// refreshPauses loads the cluster's sink pauses: at start, after a pause
// notification, after the listener (re)connected, and once per poll
// interval (see rereadPauses); and the circuit breakers (a breaker's
// change sends a pause notification too), here rather than in
// the breaker watch, which it then kicks to take the probes due: a breaker
// closed by another relay's probe wakes the claim loops right after this
// reload, and a loop that claimed the receiver's rows while this relay
// still thought it open held them until the next probe (see
// heldByBreaker), an interval later.
func (r *Relay) refreshPauses(ctx context.Context) {
	if err := r.limiter.RefreshPauses(ctx); err != nil {
		r.logger.Warn("outbox: could not load sink pauses", "error", err)
	} else {
		r.signals.EmitPausesLoaded()
	}
	if len(r.breakers) == 0 {
		return
	}
	if err := r.loadBreakers(ctx); err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("outbox: could not load circuit breakers", "error", err)
		}
		return
	}
	r.kickBreakers()
}

// rereadPauses reloads the pauses once per poll interval until ctx ends,
// and wakes the loops of sinks whose pause ended meanwhile: a resume whose
// notification was lost (its relay's listener was away, or the
// notification queue overflowed) is then missed for at most one poll
// interval. It costs one small statement per poll interval, none per
// delivery.
func (r *Relay) rereadPauses(ctx context.Context) {
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		before := r.limiter.PausedSinks()
		r.refreshPauses(ctx)
		for _, s := range before {
			if r.limiter.PausedFor(s) == 0 {
				r.listener.WakeAll()
				break
			}
		}
	}
}

// throttled reports whether s needs a claim loop of its own: it is rate
// limited, bounded below the relay's concurrency, or takes its rows in
// batches.
func (r *Relay) throttled(s SinkConfig) bool {
	_, batches := s.Sink.(sink.BatchSink)
	return s.RateLimit != nil || s.MaxInFlight < r.cfg.Concurrency || batches
}

// sleep waits d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
