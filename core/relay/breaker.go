package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/breaker"
	"github.com/outboxd/outboxd/core/internal/breakerevent"
	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/otelscope"
	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/internal/store"
)

// A circuit breaker per receiver (a sink, or one rate key of a sink
// limited per key) keeps an outage from turning good messages into dead
// letters, and the cluster from hammering the receiver:
//
//   - closed: each relay counts its deliveries' outcomes in memory
//     (breaker.Window, no statement per delivery); when they say the
//     receiver is unwell it opens the breaker in PostgreSQL
//     (destination_breakers, migration 008), logs a WARN and publishes
//     outboxd.destination.opened;
//   - open: no relay claims the receiver's rows (claim.sql skips an
//     open sink; dispatchByKey hands an open key's rows back, attempt
//     refunded), and a delivery already under way that fails for the
//     receiver's sake gets its attempt back;
//   - probing: once per probe interval (doubling at each failed probe, up
//     to a cap) one relay wins the probe (breaker_take_probe.sql) and
//     delivers one real row. A success, or a failure the message earned by
//     itself (a permanent 4xx), closes the breaker (INFO,
//     outboxd.destination.closed) and the rows the outage put off come due
//     at once; any other failure refunds the probe's attempt and puts the
//     row off to the next probe, so the next probe tries another row and a
//     poison message cannot hold the breaker open. A probe that finds no
//     row to send is given back (breaker_return_probe.sql): it says nothing
//     about the receiver, so the breaker keeps the receiver's last real
//     failure, as `outboxd stats`, the API and the console show it, and
//     its interval does not double. While a Retry-After pauses the sink no
//     probe is taken (the claim would find none of its rows): the first
//     one goes out when the pause ends.
//
// While the breaker is closed and still deciding, an outage spends no
// row's last attempt (breaker_spare.go).
//
// Every relay re-reads the open breakers once per poll interval and on
// every pause notification (a breaker's change sends one): a healthy
// cluster has none, so the read is of an empty table.
//
// The table destination_breakers and its column dest_key keep their names
// for compatibility: "destination" in them means a receiver.

// errProbeHeld is the stored error of a row a breaker hands back.
var errProbeHeld = errors.New("circuit breaker open: waiting for the receiver's next probe")

// sinkBreakers are one sink's breakers on this relay.
type sinkBreakers struct {
	name string
	cfg  CircuitBreaker
	th   breaker.Thresholds
	// autoDisableAfter, above 0, is how long the breaker of a tenant's
	// destination may stay open before the relay disables the destination
	// (see breaker_autodisable.go).
	autoDisableAfter time.Duration

	mu sync.Mutex
	// windows count recent outcomes by rate key ("" for the sink);
	// a key's window exists from its first failure until it is idle.
	windows map[string]*breaker.Window
	opening map[string]bool // an open statement is under way
	// open are the open breakers, by key, as last read from the database.
	open map[string]openBreaker
	// probeRows are, by rate key whose breaker is open, the probe that a
	// row of the key was handed back for, due then (see holdOpenKeys).
	probeRows map[string]time.Time
}

// openBreaker is an open breaker as this relay last read it.
type openBreaker struct {
	since       time.Time
	lastFailure string
	nextProbe   time.Time
	probing     bool
}

// newBreakers returns the breakers of every sink that has them on.
func newBreakers(sinks map[string]SinkConfig) map[string]*sinkBreakers {
	out := map[string]*sinkBreakers{}
	for name, s := range sinks {
		if s.CircuitBreaker.Disabled {
			continue
		}
		out[name] = &sinkBreakers{name: name, cfg: s.CircuitBreaker, th: s.CircuitBreaker.thresholds(),
			autoDisableAfter: max(0, s.AutoDisableAfter), windows: map[string]*breaker.Window{}, opening: map[string]bool{},
			open: map[string]openBreaker{}, probeRows: map[string]time.Time{}}
	}
	return out
}

// settleBreaker counts a delivery's outcome toward its receiver's
// breaker (row speaks for the delivery: see lead) and reports whether the
// breaker holds the delivery's rows, and for how long: a probe's failure,
// or a failure for the receiver's sake while its breaker is open, gives
// the attempts back and puts the rows off to the next probe. It runs in
// the pipeline's feedback step, once per delivery sent: in memory only,
// under the sink's own lock, but for a probe, whose outcome is written to
// the breaker.
func (r *Relay) settleBreaker(ctx context.Context, row *claimedRow, err error) (time.Duration, bool) {
	sb := r.breakers[row.Sink]
	if sb == nil {
		return 0, false
	}
	sig := breaker.Classify(err)
	if row.probe {
		if sig == breaker.Answered {
			r.closeBreaker(ctx, sb, row.rateKey)
			return 0, false
		}
		// A probe answered with a Retry-After is asked again when the
		// receiver said (see breaker_probe_failed.sql), and so is its row.
		retryAfter, _ := sink.RetryAfterDelay(err)
		retryAfter = max(retryAfter, 0)
		r.probeFailed(ctx, sb, row.rateKey, err, retryAfter)
		return cmp.Or(retryAfter, sb.cfg.ProbeInterval), true
	}
	if sig == breaker.Neutral {
		return 0, false
	}
	now := time.Now()
	sb.mu.Lock()
	if ob, open := sb.open[row.rateKey]; open && sig != breaker.Answered {
		sb.mu.Unlock()
		return time.Until(ob.nextProbe), true
	}
	w := sb.windows[row.rateKey]
	if w == nil {
		if sig == breaker.Answered && row.rateKey != "" {
			// A key without a failure has no window: a sink with many
			// keys keeps none for the healthy ones.
			sb.mu.Unlock()
			return 0, false
		}
		w = &breaker.Window{}
		sb.windows[row.rateKey] = w
	}
	opens, reason := w.Record(sig, now, sb.th)
	if !opens && row.rateKey != "" && w.Idle(now, sb.th) {
		delete(sb.windows, row.rateKey)
	}
	opens = opens && !sb.opening[row.rateKey]
	if opens {
		sb.opening[row.rateKey] = true
	}
	sb.mu.Unlock()
	if opens {
		failure := safetext.Text(err.Error(), safetext.MaxErrorBytes)
		go r.openBreaker(context.WithoutCancel(ctx), sb, row.rateKey, reason, failure)
	}
	return 0, false
}

// errOpenBeforeStart is why a row claimed before its receiver's breaker
// opened is handed back instead of delivered.
var errOpenBeforeStart = errors.New("the breaker opened after the row was claimed, before its delivery started")

// heldByBreaker reports whether row, not a probe, must wait for its
// receiver's next probe because the breaker opened after the row was
// claimed (a claim made while it was open would not have taken it), and
// when that probe is due.
func (r *Relay) heldByBreaker(row *claimedRow) (time.Time, bool) {
	sb := r.breakers[row.Sink]
	if sb == nil || row.probe {
		return time.Time{}, false
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	ob, open := sb.open[row.rateKey]
	return ob.nextProbe, open
}

// holdForProbe hands row back, its attempt refunded, due after delay (at
// least a poll interval, so a row held this way is not claimed again and
// again before the probe).
func (r *Relay) holdForProbe(row *claimedRow, span trace.Span, delay time.Duration, cause error) {
	r.release(row, max(delay, r.cfg.PollInterval), fmt.Errorf("%w (%w)", errProbeHeld, cause))
	endSpan(span, outcomeRateLimited, r.storedError(cause))
}

// openBreaker opens the breaker of (sb, key) for the cluster and, if this
// relay opened it, says so once: a WARN, the opens counter, the event
// outboxd.destination.opened through the routes, and
// outboxd.destination.failing to the destination's tenant (notifyTenant).
func (r *Relay) openBreaker(ctx context.Context, sb *sinkBreakers, key, reason, failure string) {
	defer func() {
		sb.mu.Lock()
		delete(sb.opening, key)
		sb.mu.Unlock()
	}()
	var opened store.BreakerOpenRow
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		opened, err = r.q.BreakerOpen(ctx, tx, store.BreakerOpenParams{Sink: sb.name, DestKey: key, Reason: reason,
			LastFailure: failure, ProbeInterval: sb.cfg.ProbeInterval, Channel: r.q.Channel, Payload: store.PausePrefix + sb.name})
		if err != nil || !opened.Opened {
			return err
		}
		if err := r.publishBreakerEvent(ctx, tx, status.EventDestinationOpened, sb.name, key, reason, opened.OpenedAt); err != nil {
			return err
		}
		return r.notifyTenant(ctx, tx, status.EventDestinationFailing, sb, key, status.HealthFailing, opened.OpenedAt)
	})
	if err != nil {
		r.logger.Warn("outbox: could not open a circuit breaker", "sink", sb.name, "key", key, "error", err)
		return
	}
	sb.mu.Lock()
	sb.open[key] = openBreaker{since: opened.OpenedAt, lastFailure: failure, nextProbe: time.Now().Add(sb.cfg.ProbeInterval)}
	sb.mu.Unlock()
	if !opened.Opened {
		return
	}
	r.metrics.circuitOpens.Add(ctx, 1, r.labels[sb.name].sink...)
	r.logger.Warn("outbox: circuit breaker opened: the cluster stops delivering to this receiver and probes it",
		"sink", sb.name, "key", key, "reason", reason, "last_error", failure, "probe_in", sb.cfg.ProbeInterval)
	r.signals.EmitBreaker(sb.name, key, true)
}

// closeBreaker closes the breaker of (sb, key) after its probe succeeded
// and, if this relay closed it, says so once: an INFO, the event
// outboxd.destination.closed, and outboxd.destination.recovered to the
// destination's tenant (notifyTenant).
func (r *Relay) closeBreaker(ctx context.Context, sb *sinkBreakers, key string) {
	var closed store.BreakerCloseRow
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		p := store.BreakerCloseParams{Sink: sb.name, DestKey: key, Channel: r.q.Channel, Payload: store.PausePrefix + sb.name}
		if key != "" {
			p.HeldError = *r.storedError(heldForKey(key))
		}
		closed, err = r.q.BreakerClose(ctx, tx, p)
		if err != nil || !closed.Closed {
			return err
		}
		if err := r.publishBreakerEvent(ctx, tx, status.EventDestinationClosed, sb.name, key, *closed.Reason, *closed.OpenedAt); err != nil {
			return err
		}
		return r.notifyTenant(ctx, tx, status.EventDestinationRecovered, sb, key, status.HealthHealthy, time.Now())
	})
	if err != nil {
		r.logger.Warn("outbox: could not close a circuit breaker", "sink", sb.name, "key", key, "error", err)
		return
	}
	sb.mu.Lock()
	delete(sb.open, key)
	delete(sb.windows, key)
	sb.mu.Unlock()
	if closed.Closed {
		r.logger.Info("outbox: circuit breaker closed: the receiver answered a probe; delivery resumes",
			"sink", sb.name, "key", key, "open_for", time.Since(*closed.OpenedAt).Round(time.Millisecond))
		r.signals.EmitBreaker(sb.name, key, false)
	}
}

// probeFailed records a probe the receiver failed with cause; the breaker
// stays open, its probe interval doubles, and its next probe comes after
// retryAfter when the receiver answered with one (above zero), else after
// the doubled interval.
func (r *Relay) probeFailed(ctx context.Context, sb *sinkBreakers, key string, cause error, retryAfter time.Duration) {
	failure := safetext.Text(cause.Error(), safetext.MaxErrorBytes)
	p := store.BreakerProbeFailedParams{Sink: sb.name, DestKey: key, LastFailure: failure, RetryAfter: retryAfter,
		MaxInterval: sb.cfg.MaxProbeInterval}
	if err := r.q.BreakerProbeFailed(ctx, r.db, p); err != nil {
		r.logger.Warn("outbox: could not record a failed probe", "sink", sb.name, "key", key, "error", err)
	}
}

// returnProbe gives back the probe of (sb, key) this relay took but had
// no row to send with (see breaker_return_probe.sql): the breaker stays
// open as it was, its last failure the receiver's.
func (r *Relay) returnProbe(ctx context.Context, sb *sinkBreakers, key string) {
	if err := r.q.BreakerReturnProbe(ctx, r.db, store.BreakerReturnProbeParams{Sink: sb.name, DestKey: key}); err != nil {
		r.logger.Warn("outbox: could not give back an unused probe", "sink", sb.name, "key", key, "error", err)
	}
}

// publishBreakerEvent publishes eventType about the breaker of (sinkName,
// key) through the routes (breakerevent.Publish), in a savepoint of tx
// (see publishInSavepoint).
func (r *Relay) publishBreakerEvent(ctx context.Context, tx pgx.Tx, eventType, sinkName, key, reason string, since time.Time) error {
	return r.publishInSavepoint(ctx, tx, eventType, sinkName, key, func(db store.DBTX) error {
		return breakerevent.Publish(ctx, r.q, db, eventType, breakerevent.Data{Sink: sinkName, Key: key, Reason: reason, Since: since})
	})
}

// publishInSavepoint runs publish, which publishes eventType about the
// breaker of (sinkName, key), in a savepoint of tx: a route that cannot
// render the event (a thread_key template asking for data it lacks)
// costs the event, logged, never the breaker's change.
func (r *Relay) publishInSavepoint(ctx context.Context, tx pgx.Tx, eventType, sinkName, key string, publish func(store.DBTX) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if err := publish(sp); err != nil {
		r.logger.Warn("outbox: could not publish a circuit breaker's event", "event", eventType, "sink", sinkName, "key", key, "error", err)
		return sp.Rollback(ctx)
	}
	return sp.Commit(ctx)
}

// inTx runs f in a transaction of the relay's pool.
func (r *Relay) inTx(ctx context.Context, f func(tx pgx.Tx) error) error {
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// watchedBreakers are the relay's breakers as its breaker watch
// (maintenance.BreakerWatch) drives them, the probes they start delivered
// in deliverCtx. The watch re-reads the open breakers every poll interval
// (when kicked, refreshPauses has just read them), disables the tenants'
// destinations whose breakers stayed open too long
// (breaker_autodisable.go), and takes the probes due of the sinks whose
// rows the claim skips (those limited per key are probed by their
// dispatch, see holdOpenKeys).
type watchedBreakers struct {
	r          *Relay
	deliverCtx context.Context
}

var _ maintenance.Breakers = watchedBreakers{}

func (b watchedBreakers) LoadBreakers(ctx context.Context) error { return b.r.loadBreakers(ctx) }

func (b watchedBreakers) ActOnBreakers(ctx context.Context) time.Duration {
	b.r.disableLongOpen(ctx)
	return b.r.probeSinks(ctx, b.deliverCtx)
}

func (b watchedBreakers) RegisterCircuitGauge() (metric.Registration, error) {
	return b.r.registerCircuitGauge()
}

// kickBreakers makes the breaker watch act on the breakers refreshPauses has
// just read, now.
func (r *Relay) kickBreakers() {
	select {
	case r.breakerKick <- struct{}{}:
	default:
	}
}

// loadBreakers replaces each sink's view of its open breakers with the
// database's.
func (r *Relay) loadBreakers(ctx context.Context) error {
	rows, err := r.q.Breakers(ctx, r.db)
	if err != nil {
		return err
	}
	fresh := map[string]map[string]openBreaker{}
	for _, row := range rows {
		if r.breakers[row.Sink] == nil {
			continue
		}
		if fresh[row.Sink] == nil {
			fresh[row.Sink] = map[string]openBreaker{}
		}
		fresh[row.Sink][row.DestKey] = openBreaker{since: row.OpenedAt, lastFailure: row.LastFailure,
			nextProbe: row.NextProbeAt, probing: row.Probing}
	}
	for name, sb := range r.breakers {
		sb.mu.Lock()
		sb.open = fresh[name]
		if sb.open == nil {
			sb.open = map[string]openBreaker{}
		}
		for key := range sb.probeRows {
			if _, open := sb.open[key]; !open {
				delete(sb.probeRows, key)
			}
		}
		sb.mu.Unlock()
	}
	return nil
}

// probeSinks takes each due probe of an open sink (not a key) and
// delivers one of its rows as the probe; it returns how soon the next
// probe of an open sink comes due, or the Retry-After pause that holds it
// back ends (0: none is open).
func (r *Relay) probeSinks(ctx, deliverCtx context.Context) time.Duration {
	next := time.Duration(0)
	for name, sb := range r.breakers {
		sb.mu.Lock()
		ob, open := sb.open[""]
		sb.mu.Unlock()
		if !open {
			continue
		}
		// The claim skips a paused sink's rows: a probe taken now would
		// find none to send, so none is taken until the pause ends.
		if wait := max(time.Until(ob.nextProbe), r.limiter.PausedFor(name)); wait > 0 || ob.probing {
			if wait > 0 && (next == 0 || wait < next) {
				next = wait
			}
			continue
		}
		if wait := r.probePermitIn(name); wait > 0 {
			// A probe taken now would find no permit and be held for its lease.
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		if !r.takeProbe(ctx, sb, "") {
			continue
		}
		rows, err := r.claimRows(ctx, store.ClaimParams{Limit: 1, Sinks: []string{name}, ProbeSink: name})
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("outbox: could not claim a probe's row", "sink", name, "error", err)
		}
		if len(rows) == 0 {
			// Nothing to probe with is no news of the receiver.
			r.returnProbe(ctx, sb, "")
			continue
		}
		r.countProbe(ctx, sb)
		r.startProbe(ctx, deliverCtx, rows[0])
	}
	return next
}

// takeProbe tries to win the due probe of (sb, key) for this relay.
func (r *Relay) takeProbe(ctx context.Context, sb *sinkBreakers, key string) bool {
	n, err := r.q.BreakerTakeProbe(ctx, r.db, store.BreakerTakeProbeParams{Sink: sb.name, DestKey: key,
		Lease: r.cfg.Lease})
	if err != nil {
		r.logger.Warn("outbox: could not take a circuit breaker's probe", "sink", sb.name, "key", key, "error", err)
		return false
	}
	return n > 0
}

// countProbe counts a probe of sb's receiver once it has a row to send: a
// round that found none is not one.
func (r *Relay) countProbe(ctx context.Context, sb *sinkBreakers) {
	r.metrics.circuitProbes.Add(ctx, 1, r.labels[sb.name].sink...)
}

// holdOpenKeys hands back the rows of every rate key whose breaker is
// open, attempts refunded, but for one row of a key whose probe this
// relay wins: that row goes on, as the probe. The claim cannot tell a
// row's key (the sink names it once the row is claimed), so a key's rows
// are kept out of the claims while its breaker is open by when they come
// due: one of them per relay and probe, the probe's row, at the key's
// next probe (takeProbeRow); the others are parked until the breaker
// closes, which brings them due at once (breaker_close.sql finds them by
// their error, heldForKey's), or for the breaker's longest probe interval
// should nothing close it (a probe row that dies unsent, a breaker closed
// by hand). Due at the next probe, as they were, every row of the key was
// claimed and handed back again at each probe: 501 row updates for 39
// rows in torture seed 11.
func (r *Relay) holdOpenKeys(ctx context.Context, s SinkConfig, groups []keyedRows) []keyedRows {
	sb := r.breakers[s.Name]
	if sb == nil {
		return groups
	}
	sb.mu.Lock()
	if len(sb.open) == 0 {
		sb.mu.Unlock()
		return groups
	}
	open := make(map[string]openBreaker, len(sb.open))
	for _, g := range groups {
		if ob, ok := sb.open[g.key]; ok {
			open[g.key] = ob
		}
	}
	sb.mu.Unlock()
	kept := groups[:0]
	for _, g := range groups {
		ob, isOpen := open[g.key]
		if !isOpen {
			kept = append(kept, g)
			continue
		}
		hold := g.rows
		if !ob.probing && !time.Now().Before(ob.nextProbe) && r.takeProbe(ctx, sb, g.key) {
			g.rows[0].probe = true
			r.countProbe(ctx, sb)
			kept = append(kept, keyedRows{key: g.key, rows: g.rows[:1]})
			hold = g.rows[1:] // a failed probe holds its row for the next one
		}
		cause := heldForKey(g.key)
		for _, row := range hold {
			delay := max(time.Until(ob.nextProbe), r.cfg.PollInterval)
			if !sb.takeProbeRow(g.key, ob.nextProbe) {
				delay = max(delay, sb.cfg.MaxProbeInterval)
			}
			r.release(row, delay, cause)
		}
	}
	return kept
}

// takeProbeRow reports whether a row of key, whose breaker's next probe
// is at, is the one this relay hands back due then: the first it holds
// for that probe.
func (sb *sinkBreakers) takeProbeRow(key string, at time.Time) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.probeRows[key].Equal(at) {
		return false
	}
	sb.probeRows[key] = at
	return true
}

// heldForKey is the error of the rows holdOpenKeys hands back while the
// breaker of their rate key is open: its text names the key, so that the
// key's close finds them (see closeBreaker).
func heldForKey(key string) error {
	return fmt.Errorf("%w (rate key %q)", errProbeHeld, key)
}

// registerCircuitGauge reports each sink's breaker state as the gauge
// outbox.sink.circuit_state (Prometheus: outbox_sink_circuit_state):
// 0 closed, 1 open, 2 probing; for a sink with a breaker per rate key,
// the most open of its keys (labels stay bounded: sink names only;
// `outboxd stats` names the keys).
func (r *Relay) registerCircuitGauge() (metric.Registration, error) {
	meter := meterProvider(r.cfg.MeterProvider).Meter(otelscope.Name)
	gauge, err := meter.Int64ObservableGauge("outbox.sink.circuit_state",
		metric.WithDescription("Circuit breaker state by sink: 0 closed, 1 open, 2 probing (per-key sinks: their most open key)."))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		for name, sb := range r.breakers {
			state := status.BreakerClosed.Gauge()
			sb.mu.Lock()
			for _, ob := range sb.open {
				if ob.probing {
					state = status.BreakerProbing.Gauge()
				} else {
					state = max(state, status.BreakerOpen.Gauge())
				}
			}
			sb.mu.Unlock()
			obs.ObserveInt64(gauge, state, r.labels[name].sinkObs...)
		}
		return nil
	}, gauge)
}
