package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// shutdownAbandonAfter is how long Run still waits, after cancelling the
// deliveries at the shutdown timeout, before it abandons sinks that ignore
// their context.
const shutdownAbandonAfter = 5 * time.Second

// claimRetryDelay is how long a claim loop waits after a failed claim (the
// database is unreachable, say) before trying again.
const claimRetryDelay = time.Second

// Relay claims rows from an outbox and delivers them to their sinks. Run one
// in every process; relays coordinate through PostgreSQL alone.
//
// Sinks without a rate limit or an in-flight bound of their own share one
// claim loop (one statement claims a batch across them). A sink with a rate
// limit or a max_in_flight below the relay's concurrency gets its own claim
// loop, which claims only as many rows as it can start soon, so throttled
// rows never wait in the relay while their lease runs out.
type Relay struct {
	pool    *pgxpool.Pool
	cfg     Config
	sinks   map[string]SinkConfig
	ob      *Outbox
	logger  *slog.Logger
	tracer  trace.Tracer
	metrics *relayMetrics
	// labels are each sink's metric attribute sets by sink name ("" for
	// rows naming a sink this relay does not know).
	labels map[string]*sinkLabels

	limiter   *clusterLimiter
	completer *completer
	listener  *listener

	// deliveries tracks in-flight deliveries for a bounded graceful drain.
	deliveries sync.WaitGroup
}

// NewRelay checks cfg and returns a relay that connects with pool's
// configuration for its claims and terminal writes, plus one dedicated
// connection for LISTEN. Unless Config.DurableRelayWrites is set, the relay
// opens a pool of its own whose commits do not wait for the WAL flush (see
// DurableRelayWrites); the application's pool, and so its enqueues, stay
// durable.
func NewRelay(pool *pgxpool.Pool, cfg Config) (*Relay, error) {
	cfg, sinks, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if !cfg.DurableRelayWrites {
		// A pool of the relay's own, identical but for asynchronous commits.
		pc := pool.Config()
		pc.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		if pool, err = pgxpool.NewWithConfig(context.Background(), pc); err != nil {
			return nil, fmt.Errorf("outbox: relay pool: %w", err)
		}
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	r := &Relay{
		pool:   pool,
		cfg:    cfg,
		sinks:  sinks,
		ob:     cfg.Outbox,
		logger: cfg.Logger,
		tracer: tp.Tracer(instrumentationName),
	}
	if r.metrics, err = newRelayMetrics(cfg.MeterProvider); err != nil {
		return nil, err
	}
	r.labels = map[string]*sinkLabels{"": newSinkLabels(SinkConfig{Name: unknownSinkLabel})}
	for name, s := range sinks {
		r.labels[name] = newSinkLabels(s)
	}
	r.limiter = newClusterLimiter(pool, r.ob.sql)
	r.completer = newCompleter(pool, r.ob.sql, r.logger, cfg.BatchSize)
	r.completer.deleteOnSent = cfg.DeleteOnSent
	r.listener = newListener(pool, r.ob.channel, r.logger, func(string) {
		if err := r.limiter.refreshPauses(context.Background()); err != nil {
			r.logger.Warn("outbox: could not load sink pauses", "error", err)
		}
	})
	return r, nil
}

// instrumentationName names the tracer and meter of the relay.
const instrumentationName = "github.com/outboxd/outboxd/core"

// Run relays until ctx is cancelled, then stops claiming, lets in-flight
// deliveries finish (bounded by Config.ShutdownTimeout), writes their
// outcomes and returns. It returns nil after a clean shutdown.
func (r *Relay) Run(ctx context.Context) error {
	if !r.cfg.DurableRelayWrites {
		defer r.pool.Close()
	}
	if err := r.limiter.refreshPauses(ctx); err != nil {
		r.logger.Warn("outbox: could not load sink pauses", "error", err)
	}
	// Deliveries and their terminal writes outlive ctx for the drain; this
	// context cuts them off when the drain takes too long.
	deliverCtx, abortDeliveries := context.WithCancel(context.WithoutCancel(ctx))
	defer abortDeliveries()

	var background sync.WaitGroup
	background.Go(func() { r.listener.run(ctx) })
	background.Go(func() { r.maintain(ctx) })
	completerDone := make(chan struct{})
	go func() { r.completer.run(); close(completerDone) }()

	var loops sync.WaitGroup
	var ownLoops []string // sinks with a claim loop of their own
	for _, s := range r.sinks {
		if r.throttled(s) {
			ownLoops = append(ownLoops, s.Name)
			loops.Go(func() { r.sinkLoop(ctx, deliverCtx, s) })
		}
	}
	loops.Go(func() { r.sharedLoop(ctx, deliverCtx, ownLoops) })
	loops.Wait()

	drained := make(chan struct{})
	go func() { r.deliveries.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(r.cfg.ShutdownTimeout):
		r.logger.Warn("outbox: shutdown timeout; cancelling in-flight deliveries",
			"timeout", r.cfg.ShutdownTimeout)
		abortDeliveries()
		select {
		case <-drained:
		case <-time.After(shutdownAbandonAfter):
			// Sinks that ignore their context: Run returns without them;
			// their rows are delivered again after lease expiry.
			r.logger.Warn("outbox: abandoning deliveries whose sinks ignore cancellation; their rows return at lease expiry")
		}
	}
	r.completer.stop()
	<-completerDone
	background.Wait()
	return nil
}

// throttled reports whether s needs a claim loop of its own.
func (r *Relay) throttled(s SinkConfig) bool {
	return s.RateLimit != nil || s.MaxInFlight < r.cfg.Concurrency
}

// sharedLoop claims for every sink without a loop of its own, including
// sinks this relay does not know (their rows are dead-lettered).
func (r *Relay) sharedLoop(ctx, deliverCtx context.Context, ownLoops []string) {
	slots := newSlots(r.cfg.Concurrency)
	wake := r.listener.subscribe()
	pace := newClaimPace(slots, r.cfg.Lease)
	shares := newSinkShares(max(1, int(float64(r.cfg.Concurrency)*sharedLoopSinkShare)))
	for ctx.Err() == nil {
		free := slots.waitFree(ctx)
		if free == 0 {
			return
		}
		limit := min(free+pace.ahead(r.cfg.Concurrency), r.cfg.BatchSize)
		// Never nil: NOT (sink = ANY(NULL)) would exclude everything.
		excluded := append(append([]string{}, r.limiter.pausedSinks()...), ownLoops...)
		saturated := shares.saturated()
		excluded = append(excluded, saturated...)
		rows, err := r.claim(ctx, r.ob.sql.claimAll, limit, excluded)
		if err != nil {
			r.claimFailed(ctx, err)
			continue
		}
		for _, row := range rows {
			// A row whose sink already fills its share of the slots (it
			// may be hanging) waits in its sink's queue, off the loop, so
			// rows of other sinks behind it are not held up.
			if shares.acquireOrQueue(row) {
				slots.take()
				r.deliverShared(deliverCtx, row, shares, slots)
			}
		}
		switch {
		case len(saturated) > 0 && len(rows) < limit:
			// The rows left may belong to the saturated sinks: look again
			// as soon as a delivery finishes, not at the next poll.
			r.idle(ctx, wake, slots.freed)
		case len(rows) < limit:
			r.idle(ctx, wake, nil)
		}
	}
}

// sharedLoopSinkShare is the part of the shared loop's slots one sink may
// hold. A sink that hangs until its deadline then leaves the rest to the
// other sinks of the loop instead of stalling them.
const sharedLoopSinkShare = 0.75

// sinkStallAfter is how long a sink that fills its share must go without
// finishing a delivery before the shared loop stops claiming its rows. A
// busy but fast sink always fills its share too; leaving it out of claims
// would make the claim filter its whole backlog and come back empty.
const sinkStallAfter = time.Second

// sinkShares bounds each sink's deliveries within the shared loop. Rows of
// a sink that holds its whole share wait in a queue of their own; the
// goroutine that finishes one of the sink's deliveries goes on with the next
// queued row, keeping its share and slot. (A goroutine per waiting row cost
// the relay ~15% of its CPU in a burn-down: creating, parking and scanning
// a thousand goroutines per claim.)
type sinkShares struct {
	size  int
	mu    sync.Mutex
	sinks map[string]*sinkShare
}

type sinkShare struct {
	active   int          // deliveries holding a share
	queue    []claimedRow // rows waiting for a share, in claim order
	lastDone time.Time    // when a delivery of the sink last finished
}

func newSinkShares(size int) *sinkShares {
	return &sinkShares{size: size, sinks: map[string]*sinkShare{}}
}

func (s *sinkShares) of(sink string) *sinkShare {
	sh, ok := s.sinks[sink]
	if !ok {
		sh = &sinkShare{}
		s.sinks[sink] = sh
	}
	return sh
}

// acquireOrQueue takes a share for row, or queues row (and returns false)
// when its sink holds all of its shares.
func (s *sinkShares) acquireOrQueue(row claimedRow) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.of(row.Sink)
	if sh.active < s.size {
		sh.active++
		return true
	}
	sh.queue = append(sh.queue, row)
	return false
}

// handOver is called by the holder of one of sink's shares when it is done
// with it: it returns the next queued row, which inherits the share, or
// gives the share back and returns false.
func (s *sinkShares) handOver(sink string) (claimedRow, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.of(sink)
	sh.lastDone = time.Now()
	if len(sh.queue) == 0 {
		sh.active--
		return claimedRow{}, false
	}
	next := sh.queue[0]
	sh.queue[0] = claimedRow{} // let the delivered row's payload be collected
	sh.queue = sh.queue[1:]
	return next, true
}

// saturated lists the sinks that use their whole share and have not
// finished a delivery for sinkStallAfter (they hang): claiming more of their
// rows now would only make them wait.
func (s *sinkShares) saturated() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for sink, sh := range s.sinks {
		if sh.active == s.size && time.Since(sh.lastDone) > sinkStallAfter {
			out = append(out, sink)
		}
	}
	return out
}

// deliverShared delivers row, which holds a share of its sink and a slot,
// in a goroutine that then goes on with the sink's queued rows while there
// are any. Its share and slot are given back when the queue is empty, or
// early when a delivery overruns its deadline (see deliver): the next
// queued row then starts in a goroutine of its own. Once ctx is done,
// queued rows are handed back instead of delivered.
func (r *Relay) deliverShared(ctx context.Context, row claimedRow, shares *sinkShares, slots *slots) {
	r.deliveries.Add(1)
	go func() {
		defer r.deliveries.Done()
		for {
			// Whichever comes first, the early release or the end of the
			// delivery, owns the share and slot.
			var owned atomic.Bool
			releaseEarly := func() {
				if owned.CompareAndSwap(false, true) {
					slots.give()
					if next, ok := shares.handOver(row.Sink); ok {
						slots.take()
						r.deliverShared(ctx, next, shares, slots)
					}
				}
			}
			if ctx.Err() != nil {
				r.release(row, 0, errors.New("relay shut down while the row waited for its sink's share of the slots"))
			} else {
				r.deliver(ctx, row, 0, releaseEarly)
			}
			if !owned.CompareAndSwap(false, true) {
				return // released early; the share went on without us
			}
			next, ok := shares.handOver(row.Sink)
			if !ok {
				slots.give()
				return
			}
			row = next
		}
	}()
}

// sinkLoop claims for one throttled sink: only as many rows as it has free
// in-flight slots and, with a rate limit, as many as it can start within
// rateReserveHorizon; it reserves exactly that many cluster-wide permits.
func (r *Relay) sinkLoop(ctx, deliverCtx context.Context, s SinkConfig) {
	slots := newSlots(s.MaxInFlight)
	wake := r.listener.subscribe()
	for ctx.Err() == nil {
		if d := r.limiter.pausedFor(s.Name); d > 0 {
			sleep(ctx, d)
			continue
		}
		free := slots.waitFree(ctx)
		if free == 0 {
			return
		}
		limit := min(free, r.cfg.BatchSize)
		if s.RateLimit != nil {
			limit = min(limit, max(1, int(rateReserveHorizon/s.RateLimit.interval())))
		}
		rows, err := r.claim(ctx, r.ob.sql.claimSink, limit, []string{s.Name})
		if err != nil {
			r.claimFailed(ctx, err)
			continue
		}
		if len(rows) == 0 {
			r.idle(ctx, wake, nil)
			continue
		}
		waits := make([]time.Duration, len(rows))
		if s.RateLimit != nil {
			if waits, err = r.limiter.reserve(ctx, s.Name, *s.RateLimit, len(rows)); err != nil {
				// Without permits we must not deliver: hand the rows back.
				r.logger.Warn("outbox: rate limit reservation failed; releasing claimed rows", "sink", s.Name, "error", err)
				for _, row := range rows {
					r.release(row, 0, err)
				}
				sleep(ctx, claimRetryDelay)
				continue
			}
		}
		for i, row := range rows {
			slots.take()
			r.start(deliverCtx, row, waits[i], slots.give)
		}
		if s.RateLimit != nil {
			// Claim again only when this batch's permits have come due.
			sleep(ctx, waits[len(waits)-1])
		}
	}
}

// idle waits for a wake-up, the poll interval, or a signal on also (nil
// waits for the first two only).
func (r *Relay) idle(ctx context.Context, wake, also <-chan struct{}) {
	timer := time.NewTimer(r.cfg.PollInterval)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-also:
	case <-timer.C:
	}
}

func (r *Relay) claimFailed(ctx context.Context, err error) {
	if ctx.Err() == nil {
		r.logger.Warn("outbox: claim failed", "error", err)
		sleep(ctx, claimRetryDelay)
	}
}

// claimedRow is a row this relay holds a lease on.
type claimedRow struct {
	Delivery
	token      uuid.UUID
	rowMax     *int32 // the row's own max_attempts, if any
	leaseUntil time.Time
}

func (r *Relay) claim(ctx context.Context, query string, limit int, sinks []string) ([]claimedRow, error) {
	token := uuid.New()
	claimedAt := time.Now()
	claimed, err := r.claimRows(ctx, query, limit, sinks, token, claimedAt)
	// The span is made after the fact, and only for claims that did
	// something: an idle relay polls every second and must not fill the
	// tracing backend with a trace per poll.
	if err != nil || len(claimed) > 0 {
		_, span := r.tracer.Start(ctx, "outbox claim", trace.WithTimestamp(claimedAt))
		span.SetAttributes(attrRowsClaimed.Int(len(claimed)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	return claimed, err
}

func (r *Relay) claimRows(ctx context.Context, query string, limit int, sinks []string, token uuid.UUID, claimedAt time.Time) ([]claimedRow, error) {
	rows, err := r.pool.Query(ctx, query, limit, r.cfg.Lease, sinks, token)
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	// Sized for a full claim: growing a slice of rows this large copies them.
	claimed, err := pgx.AppendRows(make([]claimedRow, 0, limit), rows, func(row pgx.CollectableRow) (claimedRow, error) {
		c := claimedRow{token: token, leaseUntil: claimedAt.Add(r.cfg.Lease)}
		var headers []byte
		var ordering *string
		err := row.Scan(&c.ID, &c.Sink, &c.DedupKey, &c.Payload, &headers, &ordering,
			&c.Attempt, &c.rowMax, &c.CreatedAt, &c.Uncertain)
		if err == nil && ordering != nil {
			c.OrderingKey = *ordering
		}
		if err == nil && string(headers) != emptyHeaders {
			err = json.Unmarshal(headers, &c.Headers)
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return claimed, nil
}

// start delivers row in its own goroutine after wait (a rate-limit permit),
// then hands the outcome to the completer; done frees the row's slot (once,
// possibly early: see deliver).
func (r *Relay) start(ctx context.Context, row claimedRow, wait time.Duration, done func()) {
	r.deliveries.Add(1)
	free := sync.OnceFunc(done)
	go func() {
		defer r.deliveries.Done()
		defer free()
		r.deliver(ctx, row, wait, free)
	}()
}

// release hands a claimed row back without spending its attempt, to be
// claimed again after delay.
func (r *Relay) release(row claimedRow, delay time.Duration, cause error) {
	msg := cause.Error()
	r.completer.submit(outcome{id: row.ID, token: row.token, status: StatusPending, delay: delay,
		err: &msg, refund: 1, leaseEnd: row.leaseUntil, urgent: row.OrderingKey != ""})
}

// deliver runs one attempt and queues its outcome. freeSlot gives the row's
// slot back when the delivery deadline passes while the sink is still
// running: a sink that ignores its context must not keep the slot and,
// slot by slot, stall every sink of its claim loop. Its late result is still
// written (as a zombie if the row was re-claimed meanwhile).
func (r *Relay) deliver(ctx context.Context, row claimedRow, wait time.Duration, freeSlot func()) {
	sink, known := r.sinks[row.Sink]
	if !known {
		r.finish(ctx, row, sink, nil, 0, Permanent(fmt.Errorf("sink %q is not configured on this relay", row.Sink)))
		return
	}
	row.MaxAttempts = sink.MaxAttempts
	if row.rowMax != nil {
		row.MaxAttempts = int(*row.rowMax)
	}
	if row.Attempt > row.MaxAttempts {
		// Every attempt so far was abandoned by a relay that died mid-delivery
		// (attempts count at claim time): this message crash-loops its relays.
		r.finish(ctx, row, sink, nil, 0, Permanent(fmt.Errorf(
			"attempts exhausted: attempt %d of %d was abandoned without a result (its relay died or overran the lease)",
			row.Attempt-1, row.MaxAttempts)))
		return
	}
	ctx = traceContext.Extract(ctx, mapCarrier(row.Headers))
	ctx, span := r.startDeliverySpan(ctx, row, sink)
	if wait > 0 && !r.waitForPermit(ctx, row, wait) {
		r.release(row, 0, errors.New("relay shutting down before the rate-limit permit came due"))
		endSpan(span, outcomeRetry, nil)
		return
	}
	if paused := r.limiter.pausedFor(row.Sink); paused > 0 {
		r.release(row, paused, fmt.Errorf("sink %q is paused by a Retry-After", row.Sink))
		endSpan(span, outcomeRateLimited, nil)
		return
	}
	budget := time.Until(row.leaseUntil.Add(-time.Duration(float64(r.cfg.Lease) * (1 - deliveryShareOfLease))))
	if budget <= 0 {
		r.release(row, 0, errors.New("lease too close to expiry to start the delivery"))
		endSpan(span, outcomeRetry, nil)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, budget)
	stopFreeing := context.AfterFunc(dctx, freeSlot)
	started := time.Now()
	inFlightAttrs := r.labels[sink.Name].inFlight
	r.metrics.inFlight.Add(ctx, 1, inFlightAttrs)
	err := callSink(dctx, sink.Sink, &row.Delivery)
	r.metrics.inFlight.Add(ctx, -1, inFlightAttrs)
	stopFreeing()
	cancel()
	r.finish(ctx, row, sink, span, time.Since(started), err)
}

// callSink calls the sink, turning a panic into a retryable error so one bad
// payload or buggy sink cannot take the relay down.
func callSink(ctx context.Context, s Sink, d *Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		}
	}()
	return s.Deliver(ctx, d)
}

func (r *Relay) waitForPermit(ctx context.Context, row claimedRow, wait time.Duration) bool {
	_, span := r.tracer.Start(ctx, "outbox rate_limit wait")
	defer span.End()
	span.SetAttributes(attrWaitSeconds.Float64(wait.Seconds()))
	return sleep(ctx, wait)
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

// claimAheadShareOfLease bounds how long claimed rows may wait in the relay
// for a free slot: rows claimed beyond the free slots must all start within
// this part of their lease at the pace deliveries currently finish.
const claimAheadShareOfLease = 0.25

// claimPace sizes a claim loop's prefetch from how fast its deliveries
// finish: a fast sink gets full batches (one statement per BatchSize rows),
// a slow one only what it can start well inside the lease.
type claimPace struct {
	slots  *slots
	window time.Duration
	last   time.Time
	done   int64
}

func newClaimPace(s *slots, lease time.Duration) *claimPace {
	return &claimPace{slots: s, window: time.Duration(float64(lease) * claimAheadShareOfLease), last: time.Now()}
}

// ahead returns how many rows beyond the free slots to claim now: at least
// minimum (one round of slots), more when deliveries finish fast enough to
// start them within the window.
func (p *claimPace) ahead(minimum int) int {
	now, done := time.Now(), p.slots.finished.Load()
	elapsed := now.Sub(p.last)
	rate := float64(done-p.done) / elapsed.Seconds()
	p.last, p.done = now, done
	return max(minimum, int(rate*p.window.Seconds()))
}

// slots bounds concurrent deliveries of one claim loop.
type slots struct {
	sem      chan struct{}
	freed    chan struct{}
	finished atomic.Int64 // deliveries finished, for claimPace
}

func newSlots(n int) *slots {
	return &slots{sem: make(chan struct{}, n), freed: make(chan struct{}, 1)}
}

// waitFree blocks until enough slots are free to make a claim worthwhile
// and returns how many are (0 when ctx is done). Claiming as soon as one
// slot frees up would turn a busy relay's claims into one-row statements.
// The threshold stays within the part of the slots that no single sink of
// the shared loop may take (1 - sharedLoopSinkShare), so a hanging sink
// cannot keep the loop from claiming for the others.
func (s *slots) waitFree(ctx context.Context) int {
	enough := max(1, int(float64(cap(s.sem))*(1-sharedLoopSinkShare)))
	for {
		if free := cap(s.sem) - len(s.sem); free >= enough {
			return free
		}
		select {
		case <-ctx.Done():
			return 0
		case <-s.freed:
		}
	}
}

func (s *slots) take() { s.sem <- struct{}{} }

func (s *slots) give() {
	s.finished.Add(1)
	<-s.sem
	select {
	case s.freed <- struct{}{}:
	default:
	}
}
