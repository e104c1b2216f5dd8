package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/destinations"
)

// The publish-filters scenario (issue 45 item 1): the cost of a publish
// whose fan-out matches payload filters, against the same without. Two
// outbox schemas hold b.sz.destTenants tenants' destsPerTenant
// destinations each, every one subscribed to order.*: in one without a
// filter, in the other each with a filter of three clauses whose amount
// bound grows with the destination's index, so that an event's amount
// decides how many of its tenant's destinations take it.
const (
	filterSchemaOff = "bench_filters_off"
	filterSchemaOn  = "bench_filters_on"
	// filterAmountStep is the amount bound's step from one destination of
	// a tenant to the next: destination d takes amounts from d x step.
	filterAmountStep = 100
	// filterAmounts is the range of the events' amounts (0 to 999): every
	// destination count from 1 to 10 comes up as often.
	filterAmounts = destsPerTenant * filterAmountStep
)

// filterOf is destination d's filter (d from 0): an amount bound, a
// currency list and an $or of the type and a prefix of a nested field,
// each of which the scenario's events pass but the amount.
func filterOf(d int) string {
	return fmt.Sprintf(`{"data.amount": {"$gte": %d}, "data.currency": {"$in": ["EUR", "CHF", "USD"]}, `+
		`"$or": [{"type": %q}, {"data.customer.tier": {"$prefix": "gold"}}]}`, d*filterAmountStep, destEventType)
}

// filterEvent is the scenario's i-th event, for tenant i mod tenants,
// and how many of the tenant's destinations its filters let through.
func filterEvent(i, tenants int) (outboxd.Event, int) {
	amount := (i * 37) % filterAmounts
	return outboxd.Event{Type: destEventType, Key: fmt.Sprintf("f%d", i), Data: map[string]any{
		"account_id": tenantID(i % tenants), "amount": amount, "currency": "EUR", "customer": map[string]any{"tier": "gold-2026"},
	}}, amount/filterAmountStep + 1
}

// filterOutbox is one schema of the scenario.
type filterOutbox struct {
	name, schema string
	ob           *outboxd.Outbox
	filtered     bool
}

// newFilterOutbox migrates schema, applies the destinations scenario's
// routes and stores tenants x destsPerTenant destinations in one
// statement, each filter checked by destinations.CheckFilter as the API
// checks it (the database compiles it as it stores it).
func newFilterOutbox(ctx context.Context, pool *pgxpool.Pool, schema string, tenants int, filtered bool, rv *receiver) (*filterOutbox, error) {
	ob, err := migrateDestRoutes(ctx, pool, schema, rv)
	if err != nil {
		return nil, err
	}
	filters := make([]*string, destsPerTenant)
	for d := range filters {
		if !filtered {
			continue
		}
		checked, err := destinations.CheckFilter(json.RawMessage(filterOf(d)))
		if err != nil {
			return nil, fmt.Errorf("the scenario's filter %d: %w", d, err)
		}
		f := string(checked)
		filters[d] = &f
	}
	_, err = pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "destinations"}.Sanitize()+` (id, tenant, url, events, filter, revision)
		SELECT format('dst_bench_%s_%s', t, d), format('tenant-%s', lpad(t::text, 4, '0')), $2, ARRAY[$3], ($4::jsonb[])[d + 1], 0
		FROM generate_series(0, $1 - 1) t, generate_series(0, $5 - 1) d`,
		tenants, rv.base+"/filters", destOrderPattern, filters, destsPerTenant)
	if err != nil {
		return nil, fmt.Errorf("store %s's destinations: %w", schema, err)
	}
	name := "without filters"
	if filtered {
		name = "each with a 3-clause filter"
	}
	return &filterOutbox{name: name, schema: schema, ob: ob, filtered: filtered}, nil
}

// filterRun is one run's publishes of one schema.
type filterRun struct {
	p50, p99 float64 // ms per publish, its transaction included
	rows     float64 // destination rows per event
	// matchUS is µs per fan-out match alone: fan_out_destinations() for
	// the same events, all in one statement, without the rows' writes or
	// a commit.
	matchUS float64
}

// runPublishFilters times b.sz.destPublishEvents publishes, one per
// transaction on one connection, into each schema, the two alternating
// from run to run, and checks that each event made the rows its
// tenant's filters let through.
func (b *bench) runPublishFilters(ctx context.Context) error {
	pool := b.store(sysOutboxd).pool()
	rv, err := startReceiver()
	if err != nil {
		return err
	}
	defer rv.close()
	var outboxes []*filterOutbox
	for _, s := range []struct {
		schema   string
		filtered bool
	}{{filterSchemaOff, false}, {filterSchemaOn, true}} {
		if !b.keep {
			defer func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+s.schema+" CASCADE") }()
		}
		o, err := newFilterOutbox(ctx, pool, s.schema, b.sz.destTenants, s.filtered, rv)
		if err != nil {
			return err
		}
		outboxes = append(outboxes, o)
	}
	runs := map[string][]filterRun{}
	for run := range b.sz.runs {
		for _, o := range rotated(outboxes, run) {
			r, err := b.publishFiltered(ctx, pool, o)
			if err != nil {
				return fmt.Errorf("%s: %w", o.name, err)
			}
			runs[o.name] = append(runs[o.name], r)
			b.logf("  run %d, destinations %s: publish p50 %.2f ms, p99 %.2f ms, %.1f rows per event, match alone %.0f µs per event", run+1, o.name, r.p50, r.p99, r.rows, r.matchUS)
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, "### publish-filters: %d tenants x %d destinations, with and without payload filters\n\n", b.sz.destTenants, destsPerTenant)
	fmt.Fprintf(&w, "Every destination subscribes to `%s`; with filters, destination d of a tenant holds `%s` (d x %d as the bound). "+
		"Each event goes to one tenant in turn, with an amount that lets 1 to 10 of its destinations through. "+
		"One publish per transaction on one connection, %d events per run; p50 and p99 are of each publish's transaction, the medians of %d runs, the two outboxes alternating. "+
		"The match alone is fan_out_destinations() for the same events in one statement: what the filters add, apart from the commit and the rows' writes.\n\n",
		destOrderPattern, filterOf(0), filterAmountStep, b.sz.destPublishEvents, b.sz.runs)
	fmt.Fprintln(&w, "| destinations | publish p50 (ms) | publish p99 (ms) | rows per event | p50 ÷ without filters | fan-out match alone (µs per event) |")
	fmt.Fprintln(&w, "|---|---:|---:|---:|---:|---:|")
	off := runs[outboxes[0].name]
	for _, o := range outboxes {
		rs := runs[o.name]
		var p50s, p99s, ratios, matches []float64
		for i, r := range rs {
			p50s, p99s, ratios = append(p50s, r.p50), append(p99s, r.p99), append(ratios, r.p50/off[i].p50)
			matches = append(matches, r.matchUS)
		}
		fmt.Fprintf(&w, "| %s | %.2f | %.2f | %.1f | %s | %.0f |\n", o.name, median(p50s), median(p99s), rs[0].rows, format("x", median(ratios)), median(matches))
	}
	fmt.Fprintln(&w)
	b.res.sections = append(b.res.sections, w.String())
	return nil
}

// publishFiltered publishes the scenario's events into o, after emptying
// its queue, and checks the rows they made.
func (b *bench) publishFiltered(ctx context.Context, pool *pgxpool.Pool, o *filterOutbox) (filterRun, error) {
	ids := make([]string, 0, 4)
	for _, t := range []string{"messages", "message_keys", "messages_history", "failed_attempts"} {
		ids = append(ids, pgx.Identifier{o.schema, t}.Sanitize())
	}
	if _, err := pool.Exec(ctx, "TRUNCATE "+strings.Join(ids, ", ")+" RESTART IDENTITY"); err != nil {
		return filterRun{}, err
	}
	n := b.sz.destPublishEvents
	took := make([]float64, n)
	want := 0
	for i := range n {
		ev, matched := filterEvent(i, b.sz.destTenants)
		if !o.filtered {
			matched = destsPerTenant
		}
		want += matched
		start := time.Now()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := o.ob.Publish(ctx, tx, ev); return err }); err != nil {
			return filterRun{}, err
		}
		took[i] = float64(time.Since(start).Nanoseconds()) / float64(time.Millisecond)
	}
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{o.schema, "messages"}.Sanitize()+" WHERE sink = $1 AND status = 'pending'", destSinkName).Scan(&rows); err != nil {
		return filterRun{}, err
	}
	if rows != want {
		return filterRun{}, fmt.Errorf("%d events made %d destination rows, want %d", n, rows, want)
	}
	matchUS, err := b.matchFiltered(ctx, pool, o, want)
	if err != nil {
		return filterRun{}, err
	}
	return filterRun{p50: percentile(took, 50), p99: percentile(took, 99), rows: float64(rows) / float64(n), matchUS: matchUS}, nil
}

// matchFiltered times fan_out_destinations() for the scenario's events
// in one statement (the events built in SQL as filterEvent builds them)
// and checks it matched want destinations: the filters' own cost, apart
// from the commit that dominates a publish.
func (b *bench) matchFiltered(ctx context.Context, pool *pgxpool.Pool, o *filterOutbox, want int) (float64, error) {
	n := b.sz.destPublishEvents
	start := time.Now()
	var matched int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM generate_series(0, $1 - 1) i,
		LATERAL `+pgx.Identifier{o.schema}.Sanitize()+`.fan_out_destinations(format('tenant-%s', lpad((i % $2)::text, 4, '0')),
			jsonb_build_object('type', $3::text, 'key', 'f' || i, 'data', jsonb_build_object('account_id', format('tenant-%s', lpad((i % $2)::text, 4, '0')),
				'amount', (i * 37) % $4, 'currency', 'EUR', 'customer', jsonb_build_object('tier', 'gold-2026')))) f`,
		n, b.sz.destTenants, destEventType, filterAmounts).Scan(&matched)
	if err != nil {
		return 0, fmt.Errorf("match: %w", err)
	}
	if matched != want {
		return 0, fmt.Errorf("fan_out_destinations() matched %d destinations for %d events, want %d", matched, n, want)
	}
	return float64(time.Since(start).Microseconds()) / float64(n), nil
}
