package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
)

// The destinations scenario's outbox schemas, in outboxd's database:
// "many" holds b.sz.destTenants tenants' destinations, "few" the
// b.sz.destTenantsFew tenants' the claim and memory figures compare it
// with.
const (
	destSchemaMany = "bench_dest_many"
	destSchemaFew  = "bench_dest_few"
	// destProducers publish the failing-tenant part's steady load.
	destProducers = 4
	// destWaitPoll is how often the scenario looks whether rows are done.
	destWaitPoll = 5 * time.Millisecond
)

// destClaimRateLimit lifts the destinations sink's per-destination rate
// limit (destinations.DefaultRate, 10/s) out of the claim measurement's way:
// with 30 destinations receiving rows it would hold the burn-down to 300
// rows/s and measure the limit, not the claims. The per-destination
// machinery (one permit reservation for every key of a claim) still runs.
var destClaimRateLimit = sink.RateLimit{Rate: 100_000, Per: time.Second, Burst: 100_000, PerKey: true}

// runDestinations is issue 25's item 9: with 10,000 destinations over
// 1,000 tenants, the cost of a publish fanning out to a tenant's 3
// destinations, the claims' cost and the relay's memory with 100 against
// 10,000 destinations, and one failing tenant among 100 healthy ones.
func (b *bench) runDestinations(ctx context.Context) error {
	if need := len(b.destPhases()) * (b.sz.destHealthyTenants + 1); need > b.sz.destTenants {
		return fmt.Errorf("the failing-tenant phases need %d tenants, the outbox has %d", need, b.sz.destTenants)
	}
	pool := b.store(sysOutboxd).pool()
	rv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rv.close()
	var outboxes []*destOutbox
	for _, s := range []struct {
		schema  string
		tenants int
	}{{destSchemaFew, b.sz.destTenantsFew}, {destSchemaMany, b.sz.destTenants}} {
		if !b.keep {
			defer func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+s.schema+" CASCADE") }()
		}
		start := time.Now()
		o, err := newDestOutbox(ctx, pool, s.schema, s.tenants, rv)
		if err != nil {
			return err
		}
		b.logf("  %s: %d destinations over %d tenants created in %s", s.schema, o.destinations(), o.tenants, time.Since(start).Round(time.Millisecond))
		outboxes = append(outboxes, o)
	}
	few, many := outboxes[0], outboxes[1]
	pub, err := b.destPublishCost(ctx, pool, few, many)
	if err != nil {
		return fmt.Errorf("publish cost: %w", err)
	}
	claims, err := b.destClaimCost(ctx, pool, few, many, rv)
	if err != nil {
		return fmt.Errorf("claim cost: %w", err)
	}
	phases, err := b.destFailingTenant(ctx, pool, many, rv)
	if err != nil {
		return fmt.Errorf("failing tenant: %w", err)
	}
	var w strings.Builder
	b.writeDestHeader(&w, few, many)
	b.writeDestPublish(&w, pub)
	b.writeDestClaims(&w, few, many, claims)
	b.writeDestPhases(&w, phases)
	b.res.sections = append(b.res.sections, w.String())
	return nil
}

func (b *bench) writeDestHeader(w *strings.Builder, few, many *destOutbox) {
	fmt.Fprintf(w, "### destinations: %d destinations over %d tenants\n\n", many.destinations(), many.tenants)
	fmt.Fprintf(w, "Each tenant has %d destinations, %d of them subscribed to `%s` (the others to `%s`); the route target is `{sink: %s, tenant: \"%s\"}`. "+
		"Every endpoint is one HTTP server on 127.0.0.1 answering 200 at once; one relay runs in the bench process with the destinations sink's defaults (`allow_private` on). "+
		"The smaller outbox holds %d destinations over %d tenants.\n\n",
		destsPerTenant, destsSubscribed, destOrderPattern, destOtherPattern, destSinkName, destTenantTemplate, few.destinations(), few.tenants)
}

// destWrite is one way of writing an event's rows in the publish-cost
// part: rows is what the sinks get per event (a fan-out's routed row,
// marked sent at once, is not counted).
type destWrite struct {
	name  string
	rows  int
	o     *destOutbox
	sink  string
	write func(ctx context.Context, tx pgx.Tx, o *destOutbox, tenant int) error
}

func publishOrder(ctx context.Context, tx pgx.Tx, o *destOutbox, tenant int) error {
	ev, _ := order(tenant)
	_, err := o.ob.Publish(ctx, tx, ev)
	return err
}

func publishPlain(ctx context.Context, tx pgx.Tx, o *destOutbox, tenant int) error {
	ev, _ := order(tenant)
	ev.Type = destPlainType
	_, err := o.ob.Publish(ctx, tx, ev)
	return err
}

func enqueueThree(ctx context.Context, tx pgx.Tx, o *destOutbox, tenant int) error {
	ev, _ := order(tenant)
	msgs := make([]outboxd.Message, destsSubscribed)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: destWebhookSink, DedupKey: fmt.Sprintf("%s/%d", ev.Key, i), Payload: ev.Data}
	}
	_, err := o.ob.EnqueueBatch(ctx, tx, msgs)
	return err
}

// destPublished is the publish-cost part's outcome: µs per event of each
// write, every run, in writes order.
type destPublished struct {
	writes []destWrite
	micros map[string][]float64
}

// destPublishCost times b.sz.destPublishEvents events of each write, one
// per transaction on one connection, the writes alternating from run to
// run, and checks each made the rows it should.
func (b *bench) destPublishCost(ctx context.Context, pool *pgxpool.Pool, few, many *destOutbox) (destPublished, error) {
	fanOut := func(o *destOutbox) string {
		return fmt.Sprintf("publish, fan-out to the tenant's %d destinations, %d destinations", destsSubscribed, o.destinations())
	}
	out := destPublished{micros: map[string][]float64{}, writes: []destWrite{
		{name: fanOut(many), rows: destsSubscribed, o: many, sink: destSinkName, write: publishOrder},
		{name: fanOut(few), rows: destsSubscribed, o: few, sink: destSinkName, write: publishOrder},
		{name: "publish to a webhook sink (1 row)", rows: 1, o: many, sink: destWebhookSink, write: publishPlain},
		{name: fmt.Sprintf("%d plain enqueues (one EnqueueBatch)", destsSubscribed), rows: destsSubscribed, o: many, sink: destWebhookSink, write: enqueueThree},
	}}
	n := b.sz.destPublishEvents
	for run := range b.sz.runs {
		for _, wr := range rotated(out.writes, run) {
			if err := wr.o.reset(ctx, pool); err != nil {
				return out, err
			}
			start := time.Now()
			for i := range n {
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return wr.write(ctx, tx, wr.o, i%wr.o.tenants) }); err != nil {
					return out, fmt.Errorf("%s: %w", wr.name, err)
				}
			}
			us := float64(time.Since(start).Microseconds()) / float64(n)
			var rows int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+wr.o.schema+".messages WHERE sink = $1 AND status = 'pending'", wr.sink).Scan(&rows); err != nil {
				return out, err
			}
			if rows != n*wr.rows {
				return out, fmt.Errorf("%s: %d events made %d rows, want %d", wr.name, n, rows, n*wr.rows)
			}
			out.micros[wr.name] = append(out.micros[wr.name], us)
			b.logf("  run %d %s: %.0f µs per event", run+1, wr.name, us)
		}
	}
	return out, nil
}

func (b *bench) writeDestPublish(w *strings.Builder, p destPublished) {
	webhook, enqueue := p.writes[2], p.writes[3]
	fmt.Fprintf(w, "Publish cost: one event per transaction on one connection, median of %d runs of %d events, tenants in turn, the writes alternating; "+
		"a ratio is the median of the runs' ratios (each run's writes ran back to back):\n\n", b.sz.runs, b.sz.destPublishEvents)
	fmt.Fprintln(w, "| write | µs per event | events/s | rows/s | ÷ publish to a webhook sink | ÷ plain enqueues of as many rows |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, wr := range p.writes {
		us := median(p.micros[wr.name])
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s |\n", wr.name, us, format("rate", 1e6/us), format("rate", float64(wr.rows)*1e6/us),
			format("x", p.ratio(wr, webhook)), format("x", p.ratio(wr, enqueue)))
	}
	fmt.Fprintln(w)
}

// ratio is the median over the runs of wr's µs per event ÷ ref's.
func (p destPublished) ratio(wr, ref destWrite) float64 {
	var xs []float64
	for i, us := range p.micros[wr.name] {
		xs = append(xs, us/p.micros[ref.name][i])
	}
	return median(xs)
}

// destClaimRun is one claim burn-down of the destinations sink.
type destClaimRun struct {
	rows, keys     int
	rate           float64 // rows/s, relay started to last delivery
	claimPer1000   float64 // claim statements' round trip per 1,000 rows (ms)
	permitsPer1000 float64 // per-destination permit reservations per 1,000 rows (ms)
	loaded         time.Duration
	heap           uint64 // HeapInuse after GC with the relay and its directory, less before them
}

// destClaimCost burns down the same number of rows with few and many
// destinations existing, alternating from run to run.
func (b *bench) destClaimCost(ctx context.Context, pool *pgxpool.Pool, few, many *destOutbox, rv *receiver) (map[string][]destClaimRun, error) {
	out := map[string][]destClaimRun{}
	conns := rv.conns.Load()
	for run := range b.sz.runs {
		for _, o := range rotated([]*destOutbox{few, many}, run) {
			r, err := b.destClaims(ctx, pool, o, rv)
			if err != nil {
				return nil, fmt.Errorf("%d destinations: %w", o.destinations(), err)
			}
			out[o.schema] = append(out[o.schema], r)
			b.logf("  run %d, %d destinations: %.0f rows/s, claim %.2f ms and permits %.2f ms per 1,000 rows, directory loaded in %s, relay heap %.1f MB",
				run+1, o.destinations(), r.rate, r.claimPer1000, r.permitsPer1000, r.loaded.Round(time.Millisecond), float64(r.heap)/(1<<20))
		}
	}
	b.res.note("destinations: the claim burn-downs' %d deliveries came over %d connections the receiver accepted (the sink's client keeps 2 idle connections per host, and every destination here is one host).",
		b.sz.runs*2*b.sz.destClaimEvents*destsSubscribed, rv.conns.Load()-conns)
	return out, nil
}

// destClaims publishes b.sz.destClaimEvents events over o's tenants,
// then lets a relay deliver their rows and measures it.
func (b *bench) destClaims(ctx context.Context, pool *pgxpool.Pool, o *destOutbox, rv *receiver) (destClaimRun, error) {
	r := destClaimRun{rows: b.sz.destClaimEvents * destsSubscribed, keys: min(o.tenants, b.sz.destClaimEvents) * destsSubscribed}
	if err := o.reset(ctx, pool); err != nil {
		return r, err
	}
	if err := o.publishBacklog(ctx, pool, b.sz.destClaimEvents); err != nil {
		return r, err
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return r, err
	}
	before := heapInUse()
	answered := rv.answered.Load()
	session, err := b.startDestRelay(ctx, o, rv, &destClaimRateLimit)
	if err != nil {
		return r, err
	}
	err = waitFor(ctx, &rv.answered, answered, r.rows, b.sz.drain)
	if err == nil {
		err = waitSettled(ctx, pool, o, b.sz.drain)
	}
	if err != nil {
		_ = session.stop()
		return r, err
	}
	r.rate = perSecond(r.rows, rv.lastNs.Load()-session.startNs)
	r.heap = heapInUse() - min(before, heapInUse())
	r.loaded = session.loaded
	var stmts []stmtSample
	var permitsNs int64
	for _, st := range session.tracer.snapshot() {
		if st.Rows > 0 { // not the empty polls after the last row
			stmts = append(stmts, st)
		}
		if st.Kind == "reserve_key_permits" {
			permitsNs += st.DurNs
		}
	}
	r.claimPer1000 = claimMsPer1000Rows(stmts)
	r.permitsPer1000 = ms(permitsNs) * 1000 / float64(r.rows)
	claims := claimDurations(stmts)
	b.res.details[fmt.Sprintf("destinations claim burn-down, %d destinations", o.destinations())] = fmt.Sprintf(
		"%d claims, %.0f rows each on average, p50 %.2f ms, p99 %.2f ms; %s", len(claims), float64(r.rows)/float64(len(claims)),
		median(claims), percentile(claims, 99), stmtSummary(stmts))
	return r, session.stop()
}

// heapInUse is the process's heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// waitSettled waits until no row of o's destinations sink is left to
// deliver: every one was recorded delivered, not just answered.
func waitSettled(ctx context.Context, pool *pgxpool.Pool, o *destOutbox, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+o.schema+".messages WHERE sink = $1 AND status <> 'sent'", destSinkName).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d rows still not delivered after %s", left, timeout)
		}
		if !sleepCtx(ctx, destWaitPoll) {
			return ctx.Err()
		}
	}
}

func (b *bench) writeDestClaims(w *strings.Builder, few, many *destOutbox, runs map[string][]destClaimRun) {
	med := func(o *destOutbox, f func(destClaimRun) float64) float64 {
		var xs []float64
		for _, r := range runs[o.schema] {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	cols := []func(destClaimRun) float64{
		func(r destClaimRun) float64 { return r.rate },
		func(r destClaimRun) float64 { return r.claimPer1000 },
		func(r destClaimRun) float64 { return r.permitsPer1000 },
		func(r destClaimRun) float64 { return ms(r.loaded.Nanoseconds()) },
		func(r destClaimRun) float64 { return float64(r.heap) / (1 << 20) },
	}
	units := []string{"rate", "ms", "ms", "ms", "mb"}
	rows := runs[many.schema][0].rows
	fmt.Fprintf(w, "Claim cost and relay memory: %d rows (%d events) burnt down with %d and with %d destinations existing, the rows spread over the subscribed destinations of every tenant, median of %d runs alternating; "+
		"a ratio is the median of the runs' ratios; the sink's per-destination rate limit lifted to %d/s so that it does not bound the burn-down (the per-destination permits are still reserved); relay heap is HeapInuse after a GC with the relay and its directory loaded, less before them:\n\n",
		rows, b.sz.destClaimEvents, few.destinations(), many.destinations(), b.sz.runs, destClaimRateLimit.Rate)
	fmt.Fprintln(w, "| destinations | destinations with rows | burn-down (rows/s) | claim per 1,000 rows (ms) | permits per 1,000 rows (ms) | directory load (ms) | relay heap (MB) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, o := range []*destOutbox{few, many} {
		fmt.Fprintf(w, "| %d | %d |", o.destinations(), runs[o.schema][0].keys)
		for i, f := range cols {
			fmt.Fprintf(w, " %s |", format(units[i], med(o, f)))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| %d ÷ %d | |", many.destinations(), few.destinations())
	for _, f := range cols {
		var ratios []float64
		for i, r := range runs[many.schema] {
			ratios = append(ratios, f(r)/f(runs[few.schema][i]))
		}
		fmt.Fprintf(w, " %s |", format("x", median(ratios)))
	}
	fmt.Fprintf(w, "\n\nThe directory holds about %.0f bytes per destination more ((heap with %d − heap with %d) ÷ %d).\n\n",
		(med(many, cols[4])-med(few, cols[4]))*(1<<20)/float64(many.destinations()-few.destinations()), many.destinations(), few.destinations(), many.destinations()-few.destinations())
}

// tenantPhase is one phase of the failing-tenant part.
type tenantPhase struct {
	name   string
	mode   failMode
	length time.Duration
}

// phaseOutcome is what one phase measured: the healthy tenants'
// commit-to-delivery latencies (ms) and the failing tenant's rows.
type phaseOutcome struct {
	phase          tenantPhase
	events         int
	published      time.Duration // how long publishing the events took
	healthy        []float64
	failingRows    int64
	failingDead    int64
	failingMaxTry  int64
	breakersOpen   int
	failingTargets int
	// breakersOpenAfter is when the last of the failing tenant's open
	// breakers opened, from the phase's start.
	breakersOpenAfter time.Duration
	// peakHanging is the most requests of the failing tenant held
	// unanswered at once (its endpoints timing out).
	peakHanging int64
}

// destPhases are the failing-tenant part's phases: all healthy, one
// tenant's endpoints answering 500, one's timing out, and all healthy
// again, whose spread against the first says how much of a ratio is the
// machine's noise.
func (b *bench) destPhases() []tenantPhase {
	healthy := fmt.Sprintf("%d healthy tenants", b.sz.destHealthyTenants+1)
	return []tenantPhase{
		{healthy, failNone, b.sz.destPhase},
		{"one tenant's endpoints answer 500", fail500, b.sz.destPhase},
		{"one tenant's endpoints time out", failHang, b.sz.destHangPhase},
		{healthy + ", again", failNone, b.sz.destPhase},
	}
}

// destFailingTenant runs the phases, each with tenants of its own (the
// last of each set is the one that fails) and an empty queue.
func (b *bench) destFailingTenant(ctx context.Context, pool *pgxpool.Pool, o *destOutbox, rv *receiver) ([]phaseOutcome, error) {
	phases := b.destPhases()
	var out []phaseOutcome
	for i, p := range phases {
		first := i * (b.sz.destHealthyTenants + 1)
		tenants := make([]int, b.sz.destHealthyTenants+1)
		for j := range tenants {
			tenants[j] = first + j
		}
		b.logf("  %s, %s at %d events/s", p.name, p.length, b.sz.destRate)
		oc, err := b.destPhase(ctx, pool, o, rv, p, tenants)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		b.logf("    %d events published in %s (%.0f/s)", oc.events, oc.published.Round(time.Millisecond), perSecond(oc.events, oc.published.Nanoseconds()))
		b.logf("    healthy p50 %.2f ms, p99 %.2f ms over %d deliveries; failing tenant: %d rows, %d dead, %d attempts at most, %d of %d breakers open, %d requests hanging at most",
			percentile(oc.healthy, 50), percentile(oc.healthy, 99), len(oc.healthy), oc.failingRows, oc.failingDead, oc.failingMaxTry, oc.breakersOpen, oc.failingTargets, oc.peakHanging)
		out = append(out, oc)
	}
	return out, nil
}

// destPhase publishes for tenants at b.sz.destRate events/s for the
// phase's length, the last tenant failing as the phase says, and waits
// until every row of the others was delivered.
func (b *bench) destPhase(ctx context.Context, pool *pgxpool.Pool, o *destOutbox, rv *receiver, p tenantPhase, tenants []int) (phaseOutcome, error) {
	oc := phaseOutcome{phase: p}
	failing := tenants[len(tenants)-1]
	if err := o.reset(ctx, pool); err != nil {
		return oc, err
	}
	if p.mode != failNone {
		rv.fail(failing, p.mode)
	}
	session, err := b.startDestRelay(ctx, o, rv, nil)
	if err != nil {
		rv.stopFailing()
		return oc, err
	}
	// The failing endpoints answer first, so that the relay stops without
	// waiting out the timeout of the requests left hanging.
	defer func() { rv.stopFailing(); _ = session.stop() }()
	rv.record()
	start := time.Now()
	commits, err := publishSteadily(ctx, pool, o, tenants, b.sz.destRate, p.length)
	if err != nil {
		return oc, err
	}
	oc.events, oc.published = len(commits.at), commits.took
	expected := 0
	for t, n := range commits.perTenant {
		if t != failing || p.mode == failNone {
			expected += n * destsSubscribed
		}
	}
	if err := waitFor(ctx, &rv.recorded, 0, expected, b.sz.drain); err != nil {
		return oc, err
	}
	if err := b.failingState(ctx, pool, o, failing, start, p.mode != failNone, &oc); err != nil {
		return oc, err
	}
	oc.peakHanging = rv.peakHanging.Load()
	for _, r := range rv.takeReceipts() {
		if r.tenant != failing {
			oc.healthy = append(oc.healthy, ms(r.ns-commits.at[r.seq]))
		}
	}
	return oc, nil
}

// failingState reads the failing tenant's rows and breakers; when the
// tenant fails, it first waits (at most b.sz.destBreakerWait) until every
// one of its destinations' breakers is open, and notes how long after the
// phase's start the last one opened.
func (b *bench) failingState(ctx context.Context, pool *pgxpool.Pool, o *destOutbox, failing int, start time.Time, fails bool, oc *phaseOutcome) error {
	ids := o.subscribed[failing]
	oc.failingTargets = len(ids)
	ops := o.ob.Operator()
	deadline := time.Now().Add(b.sz.destBreakerWait)
	for {
		breakers, err := ops.Breakers(ctx, pool)
		if err != nil {
			return err
		}
		oc.breakersOpen, oc.breakersOpenAfter = 0, 0
		for _, br := range breakers[destSinkName] {
			if slices.Contains(ids, br.Key) {
				oc.breakersOpen++
				oc.breakersOpenAfter = max(oc.breakersOpenAfter, br.Since.Sub(start))
			}
		}
		if !fails || oc.breakersOpen == len(ids) || time.Now().After(deadline) {
			break
		}
		if !sleepCtx(ctx, destWaitPoll) {
			return ctx.Err()
		}
	}
	return pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'dead'), coalesce(max(attempts), 0)
		FROM `+o.schema+`.messages WHERE sink = $1 AND headers->>'outboxd-destination' = ANY($2)`, destSinkName, ids).
		Scan(&oc.failingRows, &oc.failingDead, &oc.failingMaxTry)
}

// commitLog is when each event of a steady load committed (Unix ns, by
// sequence number), and how many events each tenant got.
type commitLog struct {
	mu        sync.Mutex
	at        map[int64]int64
	perTenant map[int]int
	// took is how long publishing them took: longer than asked when the
	// producers could not keep the rate.
	took time.Duration
}

// publishSteadily publishes order events for tenants, in turn, at rate
// events/s in all on destProducers connections, one per transaction,
// for length.
func publishSteadily(ctx context.Context, pool *pgxpool.Pool, o *destOutbox, tenants []int, rate int, length time.Duration) (*commitLog, error) {
	log := &commitLog{at: map[int64]int64{}, perTenant: map[int]int{}}
	interval := time.Duration(destProducers) * time.Second / time.Duration(rate)
	start := time.Now()
	end := start.Add(length)
	var turn atomic.Int64
	errs := make([]error, destProducers)
	var wg sync.WaitGroup
	for g := range destProducers {
		wg.Go(func() {
			for next := start.Add(time.Duration(g) * interval / destProducers); next.Before(end); next = next.Add(interval) {
				if !sleepCtx(ctx, time.Until(next)) {
					errs[g] = ctx.Err()
					return
				}
				tenant := tenants[int(turn.Add(1)-1)%len(tenants)]
				ev, n := order(tenant)
				if errs[g] = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := o.ob.Publish(ctx, tx, ev)
					return err
				}); errs[g] != nil {
					return
				}
				now := time.Now().UnixNano()
				log.mu.Lock()
				log.at[n] = now
				log.perTenant[tenant]++
				log.mu.Unlock()
			}
		})
	}
	wg.Wait()
	log.took = time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return log, nil
}

func (b *bench) writeDestPhases(w *strings.Builder, phases []phaseOutcome) {
	fmt.Fprintf(w, "One failing tenant among %d healthy ones: %d tenants publish %d events/s in all (%d destination rows/s), one event per transaction on %d connections; "+
		"each phase has tenants of its own and an empty queue, and the relay the destinations sink's defaults (%d deliveries/s per destination, breakers, %d attempts). "+
		"Latency is commit (when Commit returned) to the receiver's answer, for the %d tenants that never fail, in every phase; the last phase, all healthy again, shows the machine's noise:\n\n",
		b.sz.destHealthyTenants, b.sz.destHealthyTenants+1, b.sz.destRate, b.sz.destRate*destsSubscribed, destProducers, destinations.DefaultRate, relay.DefaultMaxAttempts, b.sz.destHealthyTenants)
	fmt.Fprintln(w, "| phase | length | events/s published | healthy deliveries | p50 (ms) | p99 (ms) | p50 ÷ first phase | p99 ÷ first phase | failing tenant's rows | dead-lettered | most attempts | breakers open | last opened after | requests hanging at once, at most | not dead-lettered early |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	base50, base99 := percentile(phases[0].healthy, 50), percentile(phases[0].healthy, 99)
	for _, oc := range phases {
		p50, p99 := percentile(oc.healthy, 50), percentile(oc.healthy, 99)
		failing, opened := "–", "–"
		if oc.phase.mode != failNone {
			failing = passFail(oc.failingDead == 0)
		}
		if oc.breakersOpen > 0 {
			opened = oc.breakersOpenAfter.Round(100 * time.Millisecond).String()
		}
		hanging := "–"
		if oc.phase.mode == failHang {
			hanging = fmt.Sprintf("%d of the relay's %d deliveries", oc.peakHanging, relay.DefaultConcurrency)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %d | %.2f | %.2f | %s | %s | %d | %d | %d | %d of %d | %s | %s | %s |\n", oc.phase.name, oc.phase.length,
			perSecond(oc.events, oc.published.Nanoseconds()), len(oc.healthy), p50, p99,
			format("x", p50/base50), format("x", p99/base99), oc.failingRows, oc.failingDead, oc.failingMaxTry, oc.breakersOpen, oc.failingTargets, opened, hanging, failing)
	}
	fmt.Fprintln(w)
}
