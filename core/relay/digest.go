package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/internal/slots"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/otelscope"
	"github.com/outboxd/outboxd/internal/store"
)

// A sink that digests (SinkConfig.Digest, RouteDigests; docs/digests.md)
// claims in a loop of its own. Its claimed rows are grouped by digest
// key; a fresh group waits (handed back, due when the window closes)
// until its first row is Window old or it holds MaxMessages rows; then it
// goes out in digests of up to MaxMessages rows, in enqueue order, each
// taking one permit of the rate limit. So rows that arrive within the
// window, and rows that wait behind the rate limit, leave together.
//
// Exactly once: a digest is recorded (record_digest.sql) before it is
// sent, with its members marked, in one durable statement; its members'
// outcomes are written in one token-guarded finish statement
// (Completer.WriteNow). A digest that fails, or whose relay dies, keeps
// its members: a claim that takes any of them takes the digest and all
// the others too, or none (claim_digest_members.sql), and sends the same
// digest again, with the same delivery id, instead of windowing its rows
// anew. One relay at a time holds a digest, so a delivery id never goes
// out with two member lists (issue 40, item 6).

// DigestStage is a Stage that also renders digests: package routing
// renders a route target's digest template this way.
type DigestStage interface {
	Stage
	// PrepareDigest renders the digest of route's rows for sinkName from
	// their events (their payloads before Prepare), in enqueue order. nil
	// means the target has no digest template: the sink joins the members
	// as each rendered. An error is every member's outcome.
	PrepareDigest(ctx context.Context, sinkName, route string, events []json.RawMessage) (json.RawMessage, error)
}

// Digest span attributes.
const (
	attrDigestID      = attribute.Key("outbox.digest.id")
	attrDigestMembers = attribute.Key("outbox.digest.members")
)

// digestRef is the recorded digest a claimed row belongs to.
type digestRef struct {
	id         int64
	deliveryID string
}

// digestGroup is rows that go out as one digest: a recorded digest (ref
// set), or, before it is chunked, the rows of one fresh digest key; or a
// single row that is not digested (see undigested).
type digestGroup struct {
	id      digestGroupID
	ref     digestRef
	rateKey string // the rate limit's key ("" for a sink-wide limit)
	key     string // the digest key
	route   string // the route whose target's policy applies, "" for the sink's
	policy  *sink.DigestPolicy
	rows    []*claimedRow
	events  []json.RawMessage // the rows' payloads before Prepare, for a digest template
}

// undigested reports whether g is one row whose route has no digest
// policy: it is delivered as any row is, with a permit of its own.
func (g digestGroup) undigested() bool { return g.policy == nil && g.ref.id == 0 }

// digestGroupID is what the rows of one group share: a recorded digest,
// or a fresh digest's route (when its target has a policy of its own),
// rate key and digest key.
type digestGroupID struct {
	digest                 int64
	route, rateKey, digKey string
}

// digester runs the digest loop of one sink.
type digester struct {
	r     *Relay
	s     SinkConfig
	ds    sink.DigestSink
	keyer sink.RateKeyer // nil when the sink names no rate keys
	// windows are the open digest windows of this relay, by group, when
	// each closes (see windowLeft); only the loop's goroutine uses them.
	windows map[digestGroupID]time.Time
	// spread spreads the digests handed back for want of a permit over
	// the coming permits across claims, as a per-key loop's rows (see
	// keySpread): due at the same permit as those of the claim before,
	// they came due together and all but one went back again.
	spread  keySpread
	digests metric.Int64Counter
	members metric.Int64Counter
	attrs   metric.MeasurementOption
}

func (r *Relay) newDigester(s SinkConfig) (*digester, error) {
	meter := meterProvider(r.cfg.MeterProvider).Meter(otelscope.Name)
	d := &digester{r: r, s: s, ds: s.Sink.(sink.DigestSink), attrs: metric.WithAttributes(otelscope.AttrSink.String(s.Name)),
		windows: map[digestGroupID]time.Time{}}
	d.keyer, _ = s.Sink.(sink.RateKeyer)
	var err1, err2 error
	d.digests, err1 = meter.Int64Counter("outbox.digests", metric.WithDescription("Digests delivered, by sink."))
	d.members, err2 = meter.Int64Counter("outbox.digest.members", metric.WithDescription("Rows delivered in digests, by sink."))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("outbox: create digest metrics: %w", err)
	}
	return d, nil
}

// digestLoop claims for a sink that digests (see above).
func (r *Relay) digestLoop(ctx, deliverCtx context.Context, s SinkConfig, w *waiter) {
	d, err := r.newDigester(s)
	if err != nil {
		r.fail(err)
		return
	}
	free := slots.New(s.MaxInFlight, int(float64(s.MaxInFlight)*claimWhenFree))
	if !r.register(ctx, w) {
		return
	}
	size := newClaimSize(r.cfg.MaxClaimBytes)
	for ctx.Err() == nil {
		if p := r.limiter.PausedFor(s.Name); p > 0 {
			r.idle(ctx, w, p, nil)
			continue
		}
		if p := r.untilPermitInReach(s); p > 0 {
			// No digest could take a permit: its rows would be handed
			// back (torture seed 110: 75 of 93 hand-backs).
			r.idle(ctx, w, min(p, r.cfg.PollInterval), nil)
			continue
		}
		if free.WaitFree(ctx) == 0 {
			return
		}
		// Many rows make one digest: the claim is bounded by bytes and
		// the batch size, not by free slots (one per digest).
		limit := size.rows(r.cfg.BatchSize)
		rows, ok := r.claimOwn(ctx, w, limit, size)
		if !ok {
			continue
		}
		nextDue := d.dispatch(ctx, deliverCtx, rows, free)
		if len(rows) < limit {
			r.idle(ctx, w, untilDue(w.idleFor(r.cfg.PollInterval), nextDue), nil)
		}
	}
}

// dispatch groups rows into digests, starts those whose window has closed
// and that have a permit soon, and hands the others back; it returns how
// soon the first row handed back comes due (0: none was).
func (d *digester) dispatch(ctx, deliverCtx context.Context, rows []*claimedRow, free *slots.Slots) time.Duration {
	r := d.r
	rows, refs, err := d.join(ctx, rows)
	if err != nil {
		r.logger.Warn("outbox: could not claim the other members of claimed rows' digests; releasing the rows", "sink", d.s.Name, "error", err)
		for _, row := range rows {
			r.release(row, 0, err)
		}
		sleep(ctx, claimRetryDelay)
		return 0
	}
	var ready []digestGroup
	nextDue := time.Duration(0)
	later := func(due time.Duration) {
		if nextDue == 0 || due < nextDue {
			nextDue = due
		}
	}
	for _, g := range d.group(deliverCtx, rows, refs) {
		if g.ref.id != 0 || g.undigested() {
			ready = append(ready, g)
			continue
		}
		if wait := d.windowLeft(g); wait > 0 {
			for _, row := range g.rows {
				r.release(row, wait, fmt.Errorf("waiting for digest %q's window to close", g.key))
			}
			later(wait)
			continue
		}
		ready = append(ready, g.chunks()...)
	}
	// Digests of one key leave in the order of their first rows.
	slices.SortFunc(ready, func(a, b digestGroup) int { return cmp.Compare(a.rows[0].ID, b.rows[0].ID) })
	a := d.permits(ctx, ready)
	for i, g := range ready {
		if a.wait[i] < 0 {
			limited := cmp.Or(g.rateKey, d.s.Name)
			due := a.due[i]
			if a.every[i] > 0 {
				due = d.spread.after(limited, due, a.every[i])
			}
			for _, row := range g.rows {
				r.release(row, due, fmt.Errorf("waiting for a permit of %q (rate_limit)", limited))
			}
			later(due)
			continue
		}
		free.Take()
		r.deliveries.Add(1)
		done := sync.OnceFunc(free.Give)
		go func() {
			defer r.deliveries.Done()
			defer done()
			if g.undigested() {
				r.deliver(deliverCtx, g.rows[0], permitAfter(a.wait[i]), done)
				return
			}
			d.send(deliverCtx, g, permitAfter(a.wait[i]))
		}()
	}
	return nextDue
}

// join takes the digests that rows belong to (digests not yet sent: one
// failed, or its relay died) whole, or not at all (claim_digest_members.sql),
// and returns rows with the other members joined, and the digest of every
// row that has one. A row whose digest another relay holds, or took from
// this claim, is handed back untouched, to come due after lostMemberDelay:
// a relay sends a digest with every open member it was recorded with, and
// no relay sends a part of it under its delivery id (issue 40, item 6).
// The members joined share the claim's token and deadline: their leases,
// taken after the claim's, end after its earliest.
func (d *digester) join(ctx context.Context, rows []*claimedRow) ([]*claimedRow, map[int64]digestRef, error) {
	ids := make([]int64, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	token, deadline, claimedAt := rows[0].token, rows[0].deadline, time.Now()
	got, err := d.r.q.ClaimDigestMembers(ctx, d.r.db, store.ClaimDigestMembersParams{IDs: ids, Token: token, Lease: d.r.cfg.Lease})
	if err != nil {
		return rows, nil, fmt.Errorf("outbox: claim digest members: %w", err)
	}
	refs := make(map[int64]digestRef, len(got))
	lost := map[int64]bool{}
	for _, g := range got {
		if !g.Held {
			lost[g.ID] = true
			continue
		}
		refs[g.ID] = digestRef{id: g.DigestID, deliveryID: g.DeliveryID}
		if !g.Joined {
			continue
		}
		c := &claimedRow{token: token, leaseUntil: claimedAt.Add(g.LeaseFromStart), rowMax: g.MaxAttempts, deadline: deadline}
		c.ID, c.Sink, c.DedupKey, c.Payload = g.ID, g.Sink, g.DedupKey, g.Payload
		c.OrderingKey, c.Route, c.ThreadKey = deref(g.OrderingKey), deref(g.Route), deref(g.ThreadKey)
		c.Attempt, c.CreatedAt, c.Uncertain, c.deferrals = g.Attempts, g.CreatedAt, g.Reclaimed, g.Deferrals
		if g.RouteVersion != nil {
			c.RouteVersion = *g.RouteVersion
		}
		c.Headers, c.undecodable = decodeHeaders(g.Headers)
		// No row of the claim is submitted yet: the deadline is still open.
		deadline.open.Add(1)
		rows = append(rows, c)
	}
	if len(lost) > 0 {
		rows = slices.DeleteFunc(rows, func(row *claimedRow) bool {
			if lost[row.ID] {
				d.r.release(row, lostMemberDelay, errors.New("its digest is another relay's to send"))
			}
			return lost[row.ID]
		})
	}
	return rows, refs, nil
}

// lostMemberDelay is how long a row whose digest another relay holds
// waits before it is claimed again: by then that relay has usually sent
// the digest, and the row, if still open, is digested afresh.
const lostMemberDelay = claimRetryDelay

// group prepares each row (see Stage), names its rate key and digest
// key, and groups the rows: by recorded digest, else by route, digest key
// and rate key. A row that cannot be prepared or keyed gets that error as
// its outcome, alone; the other members of its recorded digest are handed
// back with it (see waitForMember), so that no post of the digest leaves
// out a member that may still go out in it later.
func (d *digester) group(ctx context.Context, rows []*claimedRow, refs map[int64]digestRef) []digestGroup {
	r := d.r
	index := map[digestGroupID]int{}
	var groups []digestGroup
	spoilt := map[int64]*claimedRow{} // recorded digest -> a member that failed
	fail := func(row *claimedRow, err error) {
		if ref, recorded := refs[row.ID]; recorded && spoilt[ref.id] == nil {
			spoilt[ref.id] = row
		}
		r.finish(ctx, row, d.s, nil, 0, err)
	}
	for _, row := range rows {
		if r.refuse(ctx, row, d.s) {
			continue
		}
		event := row.Payload
		if err := r.prepare(ctx, row); err != nil {
			fail(row, err)
			continue
		}
		id, policy, err := d.keys(row, event)
		if err != nil {
			fail(row, err)
			continue
		}
		ref, recorded := refs[row.ID]
		switch {
		case recorded:
			id = digestGroupID{digest: ref.id}
		case policy == nil:
			// No digest for this row's route: a group of its own, which
			// takes a permit like a digest and is delivered as a row.
			groups = append(groups, digestGroup{rateKey: id.rateKey, rows: []*claimedRow{row}, events: []json.RawMessage{event}})
			continue
		}
		i, seen := index[id]
		if !seen {
			i = len(groups)
			index[id] = i
			groups = append(groups, digestGroup{id: id, ref: ref, rateKey: id.rateKey, key: id.digKey, route: id.route, policy: policy})
		}
		groups[i].rows = append(groups[i].rows, row)
		groups[i].events = append(groups[i].events, event)
	}
	groups = slices.DeleteFunc(groups, func(g digestGroup) bool {
		failed := spoilt[g.ref.id]
		if g.ref.id == 0 || failed == nil {
			return false
		}
		d.waitForMember(g, failed)
		return true
	})
	for _, g := range groups {
		sortMembers(g)
	}
	return groups
}

// waitForMember hands back the members of recorded digest g, one of which,
// failed, could not be prepared or keyed (its outcome is written): they
// come due with it, after its backoff, and go out together, or without it
// once it is dead. Posted without it now, the digest could be accepted
// unbeknown (a timeout), and its next post, with failed, would then be
// dropped by a receiver that de-duplicates on the delivery id while failed
// is marked sent: the members of later posts of a digest are always those
// of its earlier posts, less the dead.
func (d *digester) waitForMember(g digestGroup, failed *claimedRow) {
	cause := fmt.Errorf("digest %d waits for its member %d, which could not be prepared", g.ref.id, failed.ID)
	for _, row := range g.rows {
		d.r.release(row, d.s.Backoff.delay(failed.Attempt), cause)
	}
}

// keys names row's rate key (for its rate limit) and digest key, and
// the policy it follows; event is its payload before Prepare.
func (d *digester) keys(row *claimedRow, event json.RawMessage) (id digestGroupID, policy *sink.DigestPolicy, err error) {
	if d.keyer != nil {
		if id.rateKey, err = rateKeyOf(d.keyer, &row.Delivery); err != nil {
			return id, nil, err
		}
		row.rateKey = id.rateKey
	}
	policy = d.s.digestPolicy(row.Route)
	if policy == nil {
		return id, nil, nil // a row of an undigested route goes out alone
	}
	if _, own := d.s.RouteDigests[row.Route]; own {
		id.route = row.Route
	}
	id.digKey = id.rateKey
	if policy.Key != nil {
		raw := row.Delivery
		raw.Payload = event
		if id.digKey, err = policy.Key(&raw); err != nil {
			return id, nil, fmt.Errorf("naming the digest key: %w", err)
		}
	}
	return id, policy, nil
}

// sortMembers puts g's rows (and their events) in enqueue order.
func sortMembers(g digestGroup) {
	order := make([]int, len(g.rows))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(g.rows[a].ID, g.rows[b].ID) })
	rows, events := slices.Clone(g.rows), slices.Clone(g.events)
	for i, j := range order {
		g.rows[i], g.events[i] = rows[j], events[j]
	}
}

// windowLeft is how long a fresh group still waits for others: until the
// window of its key closes, Window after the oldest row that opened it,
// unless the group is full already. Rows of the key claimed while its
// window is open are handed back to come due when it closes, with the
// rows already waiting, so they leave in one digest. The windows are this
// relay's: rows of one key claimed by two relays may open two windows,
// and leave in two digests.
func (d *digester) windowLeft(g digestGroup) time.Duration {
	now := time.Now()
	for k, end := range d.windows {
		if now.Sub(end) > staleWindow {
			delete(d.windows, k) // the key's rows went out long ago
		}
	}
	if len(g.rows) >= g.policy.MaxMessages {
		delete(d.windows, g.id)
		return 0
	}
	end, open := d.windows[g.id]
	if !open {
		oldest := g.rows[0].CreatedAt
		for _, row := range g.rows {
			if row.CreatedAt.Before(oldest) {
				oldest = row.CreatedAt
			}
		}
		end = oldest.Add(g.policy.Window)
	}
	if left := end.Sub(now); left > windowSlack {
		d.windows[g.id] = end
		return left
	}
	delete(d.windows, g.id)
	return 0
}

const (
	// windowSlack is how close to its end a window counts as closed: the
	// rows handed back until its end come due on the database's clock,
	// which may run a little behind this relay's.
	windowSlack = 100 * time.Millisecond
	// staleWindow is how long after its end a window is forgotten.
	staleWindow = time.Minute
)

// chunks cuts a fresh group into digests of at most MaxMessages rows.
func (g digestGroup) chunks() []digestGroup {
	var out []digestGroup
	for start := 0; start < len(g.rows); start += g.policy.MaxMessages {
		end := min(start+g.policy.MaxMessages, len(g.rows))
		c := g
		c.rows, c.events = g.rows[start:end], g.events[start:end]
		out = append(out, c)
	}
	return out
}

// permits reserves one rate-limit permit per digest by the relay's one
// reservation rule (see permits.go and admission): digest i starts after
// wait[i], or is handed back.
func (d *digester) permits(ctx context.Context, ready []digestGroup) admission {
	rl, n := d.s.RateLimit, len(ready)
	if rl == nil || n == 0 {
		return admission{wait: make([]time.Duration, n), due: make([]time.Duration, n), every: make([]time.Duration, n)}
	}
	if !rl.PerKey {
		return d.r.admitSink(ctx, d.s, n)
	}
	keys := make([]string, n)
	for i, g := range ready {
		keys[i] = g.rateKey
	}
	return d.r.admitByKey(ctx, d.s, keys, noKeyRoom{})
}

// send is a digest's route through the pipeline (pipeline.go): admit
// (with permit p), record the digest when it is new, stage (render its
// template), deliver it to the sink, then finish.
func (d *digester) send(ctx context.Context, g digestGroup, p permit) {
	r := d.r
	if !r.admit(ctx, d.s, g.rows, nil, p) {
		return
	}
	if g.ref.id == 0 {
		var err error
		if g, err = d.record(ctx, g); err != nil {
			for _, row := range g.rows {
				r.release(row, 0, err)
			}
			return
		}
		if len(g.rows) == 0 {
			return // every lease was lost meanwhile: other relays own the rows
		}
	}
	dg := &sink.Digest{ID: g.ref.id, Sink: d.s.Name, Key: g.key, Members: make([]*sink.Delivery, len(g.rows))}
	for i := range g.rows {
		dg.Members[i] = &g.rows[i].Delivery
		dg.Uncertain = dg.Uncertain || g.rows[i].Uncertain
	}
	ctx, span := d.startSpan(ctx, g)
	dctx, cancel := context.WithTimeout(ctx, r.budgetOf(g.rows))
	defer cancel()
	// The digest's one call is each member's attempt: its answer and
	// start are every member's details (attempt_details.go).
	var answer sink.Answer
	started := time.Now()
	err := d.render(dctx, g, dg)
	if err == nil {
		for _, row := range g.rows {
			row.started = started
		}
		err = callDigestSink(sink.WithAnswerSlot(dctx, &answer), d.ds, dg)
		for _, row := range g.rows {
			row.answer = answer
		}
	}
	d.finish(ctx, g, dg, span, time.Since(started), err)
}

// record writes the new digest g and marks its members before it is sent
// (record_digest.sql); members whose lease was lost meanwhile are left out.
func (d *digester) record(ctx context.Context, g digestGroup) (digestGroup, error) {
	ids := make([]int64, len(g.rows))
	for i, row := range g.rows {
		ids[i] = row.ID
	}
	got, err := d.r.q.RecordDigest(ctx, d.r.db, store.RecordDigestParams{Sink: d.s.Name, Key: g.key,
		DeliveryPrefix: sink.DigestDeliveryPrefix(d.s.Name), IDs: ids, Token: g.rows[0].token})
	if err != nil {
		return g, fmt.Errorf("outbox: record digest: %w", err)
	}
	g.ref = digestRef{id: got.ID, deliveryID: got.DeliveryID}
	if len(got.Members) < len(g.rows) {
		var rows []*claimedRow
		var events []json.RawMessage
		for i, row := range g.rows {
			if !slices.Contains(got.Members, row.ID) {
				// Another relay holds its lease now: this relay writes
				// nothing for it, but its attempt here is over.
				row.end()
				continue
			}
			rows, events = append(rows, row), append(events, g.events[i])
		}
		g.rows, g.events = rows, events
	}
	return g, nil
}

// render sets dg's payload from its route target's digest template, when
// there is one.
func (d *digester) render(ctx context.Context, g digestGroup, dg *sink.Digest) error {
	st, ok := d.r.cfg.Stage.(DigestStage)
	if !ok || g.route == "" {
		return nil
	}
	payload, err := st.PrepareDigest(ctx, d.s.Name, g.route, g.events)
	dg.Payload = payload
	return err
}

// startSpan opens the digest's span, linked to each member's producer
// span: the members' traces lead to the one delivery that carried them.
func (d *digester) startSpan(ctx context.Context, g digestGroup) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(g.rows))
	for _, row := range g.rows {
		pctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(row.Headers))
		if sc := trace.SpanContextFromContext(pctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrRowID.Int64(row.ID)}})
		}
	}
	ctx, span := d.r.tracer.Start(ctx, "send digest "+d.s.Name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithNewRoot(), trace.WithLinks(links...))
	if span.IsRecording() {
		span.SetAttributes(attrMessagingSystem.String(messagingSystem), attrMessagingDestination.String(d.s.Name),
			attrMessagingMessageID.String(g.ref.deliveryID), attrMessagingOperation.String("send"),
			attrSinkType.String(d.s.Type), attrDigestID.Int64(g.ref.id), attrDigestMembers.Int(len(g.rows)),
			attrMessagingBatchCount.Int(len(g.rows)))
	}
	return ctx, span
}

// attrMessagingBatchCount is the messaging convention's number of
// messages one operation carried.
const attrMessagingBatchCount = attribute.Key("messaging.batch.message_count")

// finish is steps 5 and 6 of the pipeline for digest g: every member's
// outcome goes to the failure log, err counts once toward the receiver's
// breaker (feedback), and, unless the breaker holds the members for its
// next probe, their outcomes are written in one statement: all delivered
// (each keeps the digest's receipt), all failed alike (see shareFate), or, when the sink
// refused some members, those dead-lettered alone and the others handed
// back to go again at once as the same digest.
func (d *digester) finish(ctx context.Context, g digestGroup, dg *sink.Digest, span trace.Span, elapsed time.Duration, err error) {
	r := d.r
	refused, split := sink.RefusedMembers(err)
	memberErrs := make([]error, len(g.rows))
	again := make([]bool, len(g.rows)) // not refused, by a sink that refused others
	for i, row := range g.rows {
		memberErr := err
		if split {
			refusal, bad := refused[i]
			if !bad {
				again[i] = true
				continue
			}
			memberErr = sink.Permanent(refusal)
		}
		if memberErr == nil && dg.Receipt() != nil {
			if rerr := row.SetReceipt(dg.Receipt()); rerr != nil {
				memberErr = rerr
			}
		}
		memberErrs[i] = memberErr
		r.failures.Attempted(receiverOf(row), row.ID, memberErr)
	}
	if hold, held := r.feedback(ctx, d.s, lead(g.rows), err); held {
		r.holdAll(g.rows, []trace.Span{span}, hold, err)
		return
	}
	settled := make([]completer.Outcome, len(g.rows))
	for i, row := range g.rows {
		if !again[i] {
			settled[i] = r.settle(ctx, row, d.s, nil, elapsed, memberErrs[i])
		}
	}
	if !split {
		r.shareFate(g.rows, settled, memberErrs)
	}
	outcomes := make([]completer.Outcome, 0, len(g.rows))
	ended := make([]*claimedRow, 0, len(g.rows))
	for i, row := range g.rows {
		if again[i] {
			outcomes, ended = append(outcomes, r.releaseOutcome(row, 0, fmt.Errorf(
				"sent again as digest %d without its %d refused member(s)", g.ref.id, len(refused)))), append(ended, row)
			continue
		}
		if !r.fellBack(ctx, row) {
			outcomes, ended = append(outcomes, settled[i]), append(ended, row)
		}
	}
	// What submit does for a row, for every member, before their one write.
	for _, row := range ended {
		row.end()
	}
	r.completer.WriteNow(outcomes)
	label := outcomeSent
	var stored *string
	if err != nil {
		label, stored = outcomeRetry, r.storedError(err)
	} else {
		d.digests.Add(ctx, 1, d.attrs)
		d.members.Add(ctx, int64(len(g.rows)), d.attrs)
	}
	endSpan(span, label, stored)
}

// shareFate keeps the members of a digest together, their outcomes
// settled from one failed post: when some would die (their own attempts
// or deferrals used up, their row's max_attempts lower, an attempt spent
// by a crash before the digest was recorded) while others go again, the
// dying ones go again with them, their attempt given back, due with them.
// A later post of the digest then carries the members of the earlier
// ones, and its delivery id names one member list (guarantee 138); the
// members die together once none has an attempt left. errs are the
// members' errors.
func (r *Relay) shareFate(rows []*claimedRow, outcomes []completer.Outcome, errs []error) {
	living := -1
	for i, o := range outcomes {
		if o.Status == string(status.Failed) || o.Status == string(status.Pending) {
			living = i
			break
		}
	}
	if living < 0 {
		return
	}
	for i, row := range rows {
		if outcomes[i].Status == string(status.Dead) {
			r.retryInstead(row, &outcomes[i], outcomes[living].Delay, errs[i])
		}
	}
}

// callDigestSink calls a DigestSink, turning a panic into a retryable
// error as callSink does.
func callDigestSink(ctx context.Context, s sink.DigestSink, dg *sink.Digest) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		}
	}()
	return s.DeliverDigest(ctx, dg)
}
