package relay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/store"
)

// Fallback is a route target's fallback (plugins.yaml's fallback and
// fallback_after, see package routing): the rows route Route published
// for sink Sink go to sink To instead when Sink stays down, each handed
// over in one statement (sql/fall_back.sql) that deletes the original
// and inserts its stand-in, so exactly one of the two is delivered.
type Fallback struct {
	Route, Sink, To string
	// After is how long Sink's circuit breaker must have been open (and a
	// probe must have failed since the row arrived) for its rows to fall
	// back; with OnDead, unused.
	After time.Duration
	// OnDead hands a row over when its attempt would dead-letter it
	// (fallback_after: dead), in the attempt's token-guarded finish.
	OnDead bool
}

// Reason says why a row fell back, as the rows' fallback column, the
// delivery span's outbox.fallback.reason and the docs say it.
func (f Fallback) Reason() string {
	if f.OnDead {
		return fmt.Sprintf("sink %s would have dead-lettered it (fallback_after: dead)", f.Sink)
	}
	return fmt.Sprintf("sink %s's circuit breaker had been open for over %s", f.Sink, f.After)
}

// fallbackSuffix ends the dedup key of a stand-in row: its receiver's
// delivery id is the original's with it (see fall_back.sql).
const fallbackSuffix = "/fallback"

// fallbackSweepLimit bounds the rows one sweep statement hands over; a
// full answer is followed by another statement at once.
const fallbackSweepLimit = 1000

// Attributes of the delivery span of a stand-in row.
const (
	attrFallbackFrom   = attribute.Key("outbox.fallback.from")
	attrFallbackReason = attribute.Key("outbox.fallback.reason")
)

// fallbackKey names a route target.
type fallbackKey struct{ route, sink string }

// fallbacksOf indexes fallbacks by the target they stand in for and by
// the target that stands in.
func fallbacksOf(fallbacks []Fallback) (byPrimary, byStandIn map[fallbackKey]Fallback) {
	byPrimary, byStandIn = map[fallbackKey]Fallback{}, map[fallbackKey]Fallback{}
	for _, f := range fallbacks {
		byPrimary[fallbackKey{f.Route, f.Sink}] = f
		byStandIn[fallbackKey{f.Route, f.To}] = f
	}
	return byPrimary, byStandIn
}

// sweepFallbacks hands the rows of the targets whose fallback_after is a
// duration over to their fallbacks, once per poll interval, while the
// target's breaker has been open that long (see fall_back.sql). Every
// relay sweeps; the statement's row locks keep two from taking a row.
func (r *Relay) sweepFallbacks(ctx context.Context) {
	var swept []Fallback
	for _, f := range r.cfg.Fallbacks {
		if !f.OnDead && r.breakers[f.Sink] != nil {
			swept = append(swept, f)
		}
	}
	if len(swept) == 0 {
		return
	}
	for sleep(ctx, r.cfg.PollInterval) {
		for _, f := range swept {
			if r.breakers[f.Sink].openFor(f.After) {
				r.sweepFallback(ctx, f)
			}
		}
	}
}

// sweepFallback hands over f's target's rows that are due, a statement
// of at most fallbackSweepLimit rows at a time.
func (r *Relay) sweepFallback(ctx context.Context, f Fallback) {
	for {
		rows, err := r.q.FallBack(ctx, r.db, store.FallBackParams{Sink: f.Sink, Route: f.Route, ToSink: f.To,
			Reason: f.Reason(), After: f.After, Limit: fallbackSweepLimit})
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("outbox: could not hand rows over to a fallback", "route", f.Route, "sink", f.Sink, "fallback", f.To, "error", err)
			}
			return
		}
		for _, row := range rows {
			r.logger.Info("outbox: message fell back", "id", row.ID, "sink", f.Sink, "fallback", f.To, "fallback_id", row.FallbackID, "reason", f.Reason())
			r.signals.EmitWritten(relaysignal.Outcome{ID: row.ID, Sink: f.Sink, Status: outcomeFellBack, Written: true})
		}
		if len(rows) < fallbackSweepLimit {
			return
		}
	}
}

// openFor reports whether the sink's own breaker (not a rate key's) has
// been open for at least d, as this relay last read it.
func (sb *sinkBreakers) openFor(d time.Duration) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	ob, open := sb.open[""]
	return open && time.Since(ob.since) >= d
}

// fallBackOnDead hands row over to its target's fallback instead of
// dead-lettering it when the target has fallback_after: dead, under the
// attempt's lease, and reports whether it did: the attempt is then over,
// reported with the outcome fell-back. A row it could not hand over (its
// lease expired, the statement failed) takes its ordinary outcome.
func (r *Relay) fallBackOnDead(ctx context.Context, row *claimedRow) bool {
	f, ok := r.fallbacks[fallbackKey{row.Route, row.Sink}]
	if !ok || !f.OnDead || row.Route == "" {
		return false
	}
	id, token := row.ID, row.token
	rows, err := r.q.FallBack(context.WithoutCancel(ctx), r.db, store.FallBackParams{Sink: f.Sink, Route: f.Route, ToSink: f.To,
		Reason: f.Reason(), ID: &id, Token: &token, Limit: 1})
	if err != nil {
		r.logger.Warn("outbox: could not hand a row over to its fallback; it is dead-lettered", "id", row.ID, "sink", row.Sink, "fallback", f.To, "error", err)
		return false
	}
	if len(rows) == 0 {
		return false
	}
	r.logger.Info("outbox: message fell back", "id", row.ID, "sink", f.Sink, "fallback", f.To, "fallback_id", rows[0].FallbackID, "reason", f.Reason())
	row.end()
	rep := &row.report
	if rep.span != nil {
		rep.span.SetAttributes(attrFallbackTo.String(f.To), attrFallbackReason.String(f.Reason()))
	}
	rep.status, rep.label = outcomeFellBack, outcomeFellBack
	rep.Written(true)
	return true
}

// attrFallbackTo names the fallback a row went to instead of its dead
// letter, on the span of the attempt that would have dead-lettered it.
const attrFallbackTo = attribute.Key("outbox.fallback.to")

// fallbackAttrs are the span attributes of a stand-in row's delivery: the
// target it stands in for, and why; none for any other row.
func (r *Relay) fallbackAttrs(row *claimedRow) []attribute.KeyValue {
	if row.Route == "" || !strings.HasSuffix(row.DedupKey, fallbackSuffix) {
		return nil
	}
	f, ok := r.standIns[fallbackKey{row.Route, row.Sink}]
	if !ok {
		return nil
	}
	return []attribute.KeyValue{attrFallbackFrom.String(f.Sink), attrFallbackReason.String(f.Reason())}
}
