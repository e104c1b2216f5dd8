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
	"github.com/outboxd/outboxd/core/sink"
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
//   - probing: once per probe interval (doubling up to a cap) one relay
//     wins the probe (breaker_take_probe.sql) and delivers one real row. A
//     success, or a failure the message earned by itself (a permanent
//     4xx), closes the breaker (INFO, outboxd.destination.closed) and the
//     rows the outage put off come due at once; any other failure refunds
//     the probe's attempt and puts the row off to the next probe, so the
//     next probe tries another row and a poison message cannot hold the
//     breaker open.
//
// Every relay re-reads the open breakers once per poll interval and on
// every pause notification (a breaker's change sends one): a healthy
// cluster has none, so the read is of an empty table.
//
// The table destination_breakers and its column dest_key keep their names
// for compatibility: "destination" in them means a receiver.

// Event types a breaker publishes when it opens or closes. They keep
// "destination" in their names for compatibility: it means a receiver.
const (
	EventDestinationOpened = breakerevent.Opened
	EventDestinationClosed = breakerevent.Closed
)

// Breaker states as the outbox_sink_circuit_state gauge reports them.
const (
	circuitClosed  = 0
	circuitOpen    = 1
	circuitProbing = 2
)

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
			autoDisableAfter: autoDisableAfter(s), windows: map[string]*breaker.Window{}, opening: map[string]bool{},
			open: map[string]openBreaker{}}
	}
	return out
}

// settleBreaker counts a delivery's outcome toward its receiver's
// breaker and reports whether it handled the row itself: a probe's
// failure, or a failure for the receiver's sake while its breaker is
// open, gives the attempt back and puts the row off to the next probe.
// It runs in finish, on every delivery: in memory only, under the sink's
// own lock, but for a probe, whose outcome is written to the breaker.
func (r *Relay) settleBreaker(ctx context.Context, row *claimedRow, span trace.Span, err error) bool {
	sb := r.breakers[row.Sink]
	if sb == nil {
		return false
	}
	sig := breaker.Classify(err)
	if row.probe {
		if sig == breaker.Answered {
			r.closeBreaker(ctx, sb, row.rateKey)
			return false
		}
		// A probe answered with a Retry-After is asked again when the
		// receiver said (see breaker_probe_failed.sql), and so is its row.
		retryAfter, _ := sink.RetryAfterDelay(err)
		retryAfter = max(retryAfter, 0)
		r.probeFailed(ctx, sb, row.rateKey, err, retryAfter)
		r.holdForProbe(row, span, cmp.Or(retryAfter, sb.cfg.ProbeInterval), err)
		return true
	}
	if sig == breaker.Neutral {
		return false
	}
	now := time.Now()
	sb.mu.Lock()
	if ob, open := sb.open[row.rateKey]; open && sig != breaker.Answered {
		sb.mu.Unlock()
		r.holdForProbe(row, span, time.Until(ob.nextProbe), err)
		return true
	}
	w := sb.windows[row.rateKey]
	if w == nil {
		if sig == breaker.Answered && row.rateKey != "" {
			// A key without a failure has no window: a sink with many
			// keys keeps none for the healthy ones.
			sb.mu.Unlock()
			return false
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
	return false
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
// relay opened it, says so once: a WARN, the opens counter, and the event
// outboxd.destination.opened through the routes.
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
		return r.publishBreakerEvent(ctx, tx, EventDestinationOpened, sb.name, key, reason, opened.OpenedAt)
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
// and, if this relay closed it, says so once: an INFO and the event
// outboxd.destination.closed.
func (r *Relay) closeBreaker(ctx context.Context, sb *sinkBreakers, key string) {
	var closed store.BreakerCloseRow
	err := r.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		closed, err = r.q.BreakerClose(ctx, tx, store.BreakerCloseParams{Sink: sb.name, DestKey: key,
			Channel: r.q.Channel, Payload: store.PausePrefix + sb.name})
		if err != nil || !closed.Closed {
			return err
		}
		return r.publishBreakerEvent(ctx, tx, EventDestinationClosed, sb.name, key, *closed.Reason, *closed.OpenedAt)
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

// probeFailed records a failed probe; the breaker stays open, its next
// probe after retryAfter when the receiver answered with one (above zero),
// else at the doubled interval its take set.
func (r *Relay) probeFailed(ctx context.Context, sb *sinkBreakers, key string, cause error, retryAfter time.Duration) {
	failure := safetext.Text(cause.Error(), safetext.MaxErrorBytes)
	p := store.BreakerProbeFailedParams{Sink: sb.name, DestKey: key, LastFailure: failure, RetryAfter: retryAfter}
	if err := r.q.BreakerProbeFailed(ctx, r.db, p); err != nil {
		r.logger.Warn("outbox: could not record a failed probe", "sink", sb.name, "key", key, "error", err)
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

// watchBreakers re-reads the open breakers every poll interval (when
// kicked, refreshPauses has just read them), disables the tenants'
// destinations whose breakers stayed open too long
// (breaker_autodisable.go), and takes the probes due of the sinks whose
// rows the claim skips (those limited per key are probed by their
// dispatch, see holdOpenKeys).
func (r *Relay) watchBreakers(ctx, deliverCtx context.Context) {
	if len(r.breakers) == 0 {
		return
	}
	if reg, err := r.registerCircuitGauge(); err != nil {
		r.logger.Warn("outbox: could not register the circuit breaker gauge", "error", err)
	} else {
		defer func() { _ = reg.Unregister() }()
	}
	loaded := false // by refreshPauses, which kicked this loop
	for ctx.Err() == nil {
		next := r.cfg.PollInterval
		var err error
		if !loaded {
			err = r.loadBreakers(ctx)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("outbox: could not load circuit breakers", "error", err)
			}
		} else {
			r.disableLongOpen(ctx)
			if due := r.probeSinks(ctx, deliverCtx); due > 0 {
				next = min(next, due)
			}
		}
		loaded = false
		select {
		case <-ctx.Done():
		case <-r.breakerKick:
			loaded = true
		case <-time.After(next):
		}
	}
}

// kickBreakers makes watchBreakers act on the breakers refreshPauses has
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
		sb.mu.Unlock()
	}
	return nil
}

// probeSinks takes each due probe of an open sink (not a key) and
// delivers one of its rows as the probe; it returns how soon the next
// probe of an open sink comes due (0: none is open).
func (r *Relay) probeSinks(ctx, deliverCtx context.Context) time.Duration {
	next := time.Duration(0)
	for name, sb := range r.breakers {
		sb.mu.Lock()
		ob, open := sb.open[""]
		sb.mu.Unlock()
		if !open {
			continue
		}
		if wait := time.Until(ob.nextProbe); wait > 0 || ob.probing {
			if wait > 0 && (next == 0 || wait < next) {
				next = wait
			}
			continue
		}
		if !r.takeProbe(ctx, sb, "") {
			continue
		}
		rows, err := r.claimRows(ctx, store.ClaimParams{Limit: 1, Sinks: []string{name}, ProbeSink: name})
		if err != nil || len(rows) == 0 {
			// Nothing to probe with (or no claim): the probe passes.
			r.probeFailed(ctx, sb, "", cmpErr(err, errors.New("no row to probe with")), 0)
			continue
		}
		rows[0].probe = true
		r.start(deliverCtx, rows[0], 0, func() {})
	}
	return next
}

// cmpErr is err, or def when err is nil.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// takeProbe tries to win the due probe of (sb, key) for this relay.
func (r *Relay) takeProbe(ctx context.Context, sb *sinkBreakers, key string) bool {
	n, err := r.q.BreakerTakeProbe(ctx, r.db, store.BreakerTakeProbeParams{Sink: sb.name, DestKey: key,
		Lease: r.cfg.Lease, MaxInterval: sb.cfg.MaxProbeInterval})
	if err != nil {
		r.logger.Warn("outbox: could not take a circuit breaker's probe", "sink", sb.name, "key", key, "error", err)
		return false
	}
	if n == 0 {
		return false
	}
	r.metrics.circuitProbes.Add(ctx, 1, r.labels[sb.name].sink...)
	return true
}

// holdOpenKeys hands back the rows of every rate key whose breaker
// is open, attempts refunded, due at the key's next probe, but for one row
// of a key whose probe this relay wins: that row goes on, as the probe.
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
			kept = append(kept, keyedRows{key: g.key, rows: g.rows[:1]})
			hold = g.rows[1:]
		}
		for _, row := range hold {
			r.release(row, max(time.Until(ob.nextProbe), r.cfg.PollInterval), errProbeHeld)
		}
	}
	return kept
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
			state := int64(circuitClosed)
			sb.mu.Lock()
			for _, ob := range sb.open {
				if ob.probing {
					state = circuitProbing
				} else {
					state = max(state, circuitOpen)
				}
			}
			sb.mu.Unlock()
			obs.ObserveInt64(gauge, state, r.labels[name].sinkObs...)
		}
		return nil
	}, gauge)
}
