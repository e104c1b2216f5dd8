package destinations_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestFilterBoundsAgreeWithSQL: the bounds package destinations checks
// before storing a filter are those the database's compiler applies
// (event_filter_bounds(), migration 030), so a filter the API accepted
// always matches as written.
//
// Mutation: event_filter_bounds() answering a depth of 3 (or 63 terms,
// or 15 segments, or 4096 text bytes) fails it.
func TestFilterBoundsAgreeWithSQL(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	var textBytes, depth, terms, segments int
	if err := pool.QueryRow(t.Context(), "SELECT * FROM "+ob.Schema()+".event_filter_bounds()").Scan(&textBytes, &depth, &terms, &segments); err != nil {
		t.Fatal(err)
	}
	if textBytes != 2*destinations.MaxFilterBytes || depth != destinations.MaxFilterDepth ||
		terms != destinations.MaxFilterTerms || segments != destinations.MaxFilterSegments {
		t.Fatalf("event_filter_bounds() = (%d text bytes, depth %d, %d terms, %d segments); package destinations checks (2x%d, %d, %d, %d)",
			textBytes, depth, terms, segments, destinations.MaxFilterBytes, destinations.MaxFilterDepth,
			destinations.MaxFilterTerms, destinations.MaxFilterSegments)
	}
}

// sqlFilterMatch answers, for each pair, whether the event matches the
// filter as fan_out_destinations() matches it: the filter compiled by
// event_filter_jsonpath() (NULL: no filter, every event), matched
// silently.
func sqlFilterMatch(ctx context.Context, db *pgxpool.Pool, schema string, filters, events []string) ([]bool, error) {
	var out []bool
	err := db.QueryRow(ctx, `SELECT coalesce(array_agg(
			coalesce(jsonb_path_match(e::jsonb, `+schema+`.event_filter_jsonpath(f::jsonb), '{}', true), `+schema+`.event_filter_jsonpath(f::jsonb) IS NULL)
			ORDER BY n), '{}')
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(f, e, n)`, filters, events).Scan(&out)
	if err != nil {
		return nil, fmt.Errorf("event_filter_jsonpath: %w", err)
	}
	return out, nil
}

// TestFilterOperatorsMatchInSQL: each operator, as the database matches a
// filter package destinations accepted: equality on type and on a data
// field, $in, $nin, $gt, $gte, $lt, $lte on numbers and strings,
// $exists, $prefix, $and, $or, $not; a field holding a list matches when
// one of its elements does; a type mismatch or a missing field is a
// comparison that does not hold, never an error.
//
// Mutations, each failing it: event_filter_term() compiling $gte as
// '>' (the 1000 >= 1000 case), and $nin as $in (the three $nin cases).
func TestFilterOperatorsMatchInSQL(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	event := `{"type": "invoice.paid", "key": "i1", "data": {"amount": 1000, "currency": "EUR", "customer": {"tier": "gold", "name": "Ada"},
		"tags": ["vip", "eu"], "note": null, "paid": true, "day": "2026-12-07"}}`
	cases := []struct {
		filter string
		want   bool
	}{
		{`{"type": "invoice.paid"}`, true},
		{`{"type": "invoice.void"}`, false},
		{`{"data.currency": "EUR"}`, true},
		{`{"data.currency": "eur"}`, false},
		{`{"data.amount": 1000}`, true},
		{`{"data.amount": 1000.0}`, true},
		{`{"data.amount": "1000"}`, false},
		{`{"data.paid": true}`, true},
		{`{"data.note": null}`, true},
		{`{"data.customer.tier": "gold"}`, true},
		{`{"data.tags": "vip"}`, true},
		{`{"data.tags": "us"}`, false},
		{`{"data.currency": {"$in": ["USD", "EUR"]}}`, true},
		{`{"data.currency": {"$in": ["USD", "GBP"]}}`, false},
		{`{"data.currency": {"$nin": ["USD", "EUR"]}}`, false},
		{`{"data.currency": {"$nin": ["USD", "GBP"]}}`, true},
		{`{"data.missing": {"$nin": ["x"]}}`, true},
		{`{"data.amount": {"$gt": 999}}`, true},
		{`{"data.amount": {"$gt": 1000}}`, false},
		{`{"data.amount": {"$gte": 1000}}`, true},
		{`{"data.amount": {"$lt": 1000}}`, false},
		{`{"data.amount": {"$lte": 1000}}`, true},
		{`{"data.amount": {"$gt": 500, "$lt": 2000}}`, true},
		{`{"data.amount": {"$gt": 500, "$lt": 900}}`, false},
		{`{"data.day": {"$gte": "2026-12-01", "$lt": "2027-01-01"}}`, true},
		{`{"data.amount": {"$gt": "a"}}`, false},
		{`{"data.currency": {"$gt": 5}}`, false},
		{`{"data.customer": {"$gt": 5}}`, false},
		{`{"data.note": {"$exists": true}}`, true},
		{`{"data.missing": {"$exists": true}}`, false},
		{`{"data.missing": {"$exists": false}}`, true},
		{`{"data.amount": {"$exists": false}}`, false},
		{`{"data.customer.name": {"$prefix": "Ad"}}`, true},
		{`{"data.customer.name": {"$prefix": "ad"}}`, false},
		{`{"data.amount": {"$prefix": "1"}}`, false},
		{`{"type": {"$prefix": "invoice."}}`, true},
		{`{"$and": [{"type": "invoice.paid"}, {"data.amount": {"$gt": 500}}]}`, true},
		{`{"$and": [{"type": "invoice.paid"}, {"data.amount": {"$gt": 5000}}]}`, false},
		{`{"$or": [{"data.currency": "USD"}, {"data.amount": {"$gt": 500}}]}`, true},
		{`{"$or": [{"data.currency": "USD"}, {"data.amount": {"$gt": 5000}}]}`, false},
		{`{"$not": {"data.currency": "USD"}}`, true},
		{`{"$not": {"data.currency": "EUR"}}`, false},
		{`{"$not": {"data.amount": {"$gt": "a"}}}`, true},
		{`{"type": "invoice.paid", "data.currency": "EUR", "data.amount": {"$gt": 5000}}`, false},
		{`{}`, true},
	}
	filters, events := make([]string, len(cases)), make([]string, len(cases))
	for i, c := range cases {
		if _, err := destinations.CheckFilter(json.RawMessage(c.filter)); err != nil {
			t.Fatalf("CheckFilter(%s): %v", c.filter, err)
		}
		filters[i], events[i] = c.filter, event
	}
	got, err := sqlFilterMatch(t.Context(), pool, ob.Schema(), filters, events)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("filter %s matches: %v; want %v", c.filter, got[i], c.want)
		}
	}
}

// TestCheckFilterNamesThePath: a filter outside the grammar or the
// bounds is refused with an *InputError naming the path of what is
// refused, as the API's 422 says it; a filter at the bounds is accepted.
//
// Mutation: count() without its bound fails it (the 65-value $in
// passes).
func TestCheckFilterNamesThePath(t *testing.T) {
	t.Parallel()
	deep := `{"data.a": 1}`
	for range destinations.MaxFilterDepth {
		deep = `{"$not": ` + deep + `}`
	}
	values := make([]string, destinations.MaxFilterTerms+1)
	for i := range values {
		values[i] = fmt.Sprint(i)
	}
	cases := []struct{ filter, path string }{
		{`{"$and": [{"type": "x"}, {"data.amount": {"$gt": true}}]}`, "filter.$and[1].data.amount.$gt: "},
		{`{"$or": {"type": "x"}}`, "filter.$or: "},
		{`{"$or": []}`, "filter.$or: "},
		{`{"$and": [{}]}`, "filter.$and[0]: "},
		{`{"$not": [1]}`, "filter.$not: "},
		{`{"$where": "1"}`, "filter.$where: unknown operator"},
		{`{"key": "x"}`, "filter.key: unknown field"},
		{`{"type.x": "x"}`, "filter.type.x: unknown field"},
		{`{"data..a": "x"}`, "filter.data..a: unknown field"},
		{`{"data.a": {"$regex": ".*"}}`, "filter.data.a.$regex: unknown operator"},
		{`{"data.a": {}}`, "filter.data.a: "},
		{`{"data.a": [1, 2]}`, "filter.data.a: "},
		{`{"data.a": {"$in": [1, {"b": 2}]}}`, "filter.data.a.$in[1]: "},
		{`{"data.a": {"$nin": "x"}}`, "filter.data.a.$nin: "},
		{`{"data.a": {"$exists": "yes"}}`, "filter.data.a.$exists: "},
		{`{"data.a": {"$prefix": 1}}`, "filter.data.a.$prefix: "},
		{`{"data.a": {"$lt": 1e400}}`, "filter.data.a.$lt: "},
		{`{"data.` + strings.Repeat("a.", destinations.MaxFilterSegments) + `a": 1}`, "filter.data."},
		{deep, "filter.$not.$not.$not.$not: "},
		{`{"data.a": {"$in": [` + strings.Join(values, ",") + `]}}`, "filter.data.a.$in: "},
		{`{"data.a": "` + strings.Repeat("x", destinations.MaxFilterBytes) + `"}`, "filter is "},
		{`{"data.a": {"$in": ["x", "\u0000"]}}`, "filter.data.a.$in[1]: holds a NUL character"},
		{`{"$or": [{"data.\u0000": 1}]}`, "filter.$or[0]: a key holds a NUL character"},
		{`[]`, "filter must be a JSON object"},
		{`{"a": `, "filter must be a JSON object"},
	}
	for _, c := range cases {
		_, err := destinations.CheckFilter(json.RawMessage(c.filter))
		var input *destinations.InputError
		if !errors.As(err, &input) || !strings.HasPrefix(err.Error(), c.path) {
			t.Errorf("CheckFilter(%.80s) = %v; want an input error starting %q", c.filter, err, c.path)
		}
	}
	atBounds := `{"data.a": 1}`
	for range destinations.MaxFilterDepth - 1 {
		atBounds = `{"$not": ` + atBounds + `}`
	}
	for _, ok := range []string{atBounds, `{"data.a": {"$in": [` + strings.Join(values[1:], ",") + `]}}`, `{}`, `null`, ``} {
		if _, err := destinations.CheckFilter(json.RawMessage(ok)); err != nil {
			t.Errorf("CheckFilter(%.80s): %v", ok, err)
		}
	}
}

// TestPublishFansOutOnlyToDestinationsWhoseFilterMatches: in the
// producer's transaction, an event of a subscribed type reaches only the
// tenant's destinations whose filter it matches (and those without one);
// a filter changed by an update applies to the next publish, and one
// removed ({}) lets every event through again. A refused filter, on
// create or update, changes nothing.
//
// Mutations, each failing it: fan_out_destinations() without its filter
// test (the big-invoices destination gets the 40 EUR row); CheckFilter
// returning the compact input instead of writing it again (the create
// with a lone surrogate fails in PostgreSQL, "invalid input syntax for
// type json", a 500 where a tenant should get its filter stored).
func TestPublishFansOutOnlyToDestinationsWhoseFilterMatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	create := func(filter string) destinations.Created {
		t.Helper()
		c, err := f.store.Create(ctx, f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://acme.example/hook",
			Events: []string{"invoice.*"}, Filter: json.RawMessage(filter)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	all := create("")
	big := create(`{"type": "invoice.paid", "data.amount": {"$gt": 1000}, "data.currency": {"$in": ["EUR", "CHF"]}}`)
	if string(big.Filter) != `{"data.amount":{"$gt":1000},"data.currency":{"$in":["EUR","CHF"]},"type":"invoice.paid"}` {
		t.Fatalf("created with filter %s; want it compacted, its keys in order", big.Filter)
	}
	// A lone surrogate, which PostgreSQL's jsonb refuses, is stored as
	// U+FFFD: a filter CheckFilter accepts is one the database takes.
	if c, err := f.store.Create(ctx, f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://acme.example/hook",
		Filter: json.RawMessage(`{"data.name": "\ud800<&>"}`)}); err != nil || string(c.Filter) != "{\"data.name\":\"\ufffd<&>\"}" {
		t.Fatalf("create with a lone surrogate in the filter: %v, filter %s", err, c.Filter)
	}
	if _, err := f.store.Create(ctx, f.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://acme.example/hook",
		Filter: json.RawMessage(`{"data.amount": {"$gt": [1]}}`)}); err == nil || !strings.Contains(err.Error(), "filter.data.amount.$gt") {
		t.Fatalf("create with a bad filter: %v; want an error naming filter.data.amount.$gt", err)
	}

	publish := func(tx pgx.Tx, key string, amount float64, currency string) {
		t.Helper()
		_, err := f.ob.Publish(ctx, tx, outboxd.Event{Type: "invoice.paid", Key: key,
			Data: map[string]any{"account_id": "acme", "amount": amount, "currency": currency}})
		if err != nil {
			t.Fatal(err)
		}
	}
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	publish(tx, "small", 40, "EUR")
	publish(tx, "usd", 4000, "USD")
	publish(tx, "large", 4000, "EUR")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := func() map[string][]string {
		out := map[string][]string{}
		for _, r := range f.rows(t) {
			out[r.destination] = append(out[r.destination], r.dedupKey)
		}
		return out
	}
	rows := got()
	if len(rows[all.ID]) != 3 || len(rows[big.ID]) != 1 || !strings.Contains(rows[big.ID][0], "large") {
		t.Fatalf("rows per destination %v; want 3 for the unfiltered one, the large EUR invoice's only for the filtered one", rows)
	}

	// Updated: a bad filter changes nothing; a good one applies next.
	bad := json.RawMessage(`{"$or": [{"data.amount": 1}, {"$nope": 1}]}`)
	if _, err := f.store.Update(ctx, f.pool, testdb.Actor, "acme", big.ID, destinations.Patch{Filter: &bad}); err == nil ||
		!strings.Contains(err.Error(), "filter.$or[1].$nope") {
		t.Fatalf("update with a bad filter: %v; want an error naming filter.$or[1].$nope", err)
	}
	small := json.RawMessage(`{"data.amount": {"$lt": 100}}`)
	d, err := f.store.Update(ctx, f.pool, testdb.Actor, "acme", big.ID, destinations.Patch{Filter: &small})
	if err != nil || string(d.Filter) != `{"data.amount":{"$lt":100}}` {
		t.Fatalf("update: %v, filter %s", err, d.Filter)
	}
	if g, err := f.store.Get(ctx, f.pool, "acme", big.ID); err != nil || string(g.Filter) != `{"data.amount": {"$lt": 100}}` {
		t.Fatalf("get after update: %v, filter %s", err, g.Filter)
	}
	tx, err = f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	publish(tx, "tiny", 5, "USD")
	publish(tx, "huge", 9000, "EUR")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rows := got(); len(rows[big.ID]) != 2 || len(rows[all.ID]) != 5 {
		t.Fatalf("after the update, rows per destination %v; want the tiny invoice's added to the filtered one", rows)
	}
	none := json.RawMessage(`{}`)
	if d, err := f.store.Update(ctx, f.pool, testdb.Actor, "acme", big.ID, destinations.Patch{Filter: &none}); err != nil || d.Filter != nil {
		t.Fatalf("removing the filter: %v, filter %s", err, d.Filter)
	}
	tx, err = f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	publish(tx, "any", 500, "GBP")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rows := got(); len(rows[big.ID]) != 3 {
		t.Fatalf("without a filter, rows per destination %v; want every invoice from then on", rows)
	}
}

// randomFilter makes a random JSON value shaped more or less like a
// filter: objects of fields and operators, lists, scalars of every kind,
// at random depths, most of them outside the grammar somewhere.
func randomFilter(rng *rand.Rand, depth int) any {
	keys := []string{"$and", "$or", "$not", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists", "$prefix", "$regex",
		"type", "data", "data.amount", "data.a.b", "data..x", "key", "", `data."q`, "data.\\", "data.é\u202e"}
	if depth > 6 {
		return float64(rng.IntN(10))
	}
	switch rng.IntN(7) {
	case 0, 1, 2:
		obj := map[string]any{}
		for range 1 + rng.IntN(3) {
			obj[keys[rng.IntN(len(keys))]] = randomFilter(rng, depth+1)
		}
		return obj
	case 3:
		list := make([]any, rng.IntN(4))
		for i := range list {
			list[i] = randomFilter(rng, depth+1)
		}
		return list
	case 4:
		return []any{"x\"'\\)", "(@ == 1)", "$.**", nil, true, 1e300, -1.5}[rng.IntN(7)]
	case 5:
		return rng.Float64() * 1e6
	default:
		return rng.IntN(2) == 0
	}
}

// TestNoStoredFilterFailsAPublish (issue 41's promise, beside
// TestNoStoredDestinationFailsAnotherTenantsPublish): whatever a
// destination's filter holds, written into the table past every check, a
// producer's transaction that writes its own row and publishes for the
// hostile tenant and for acme commits whole, each publish under a 10 s
// statement timeout. Filters CheckFilter accepts compile to a predicate
// that can match (not the one that matches nothing), so the two checks
// agree.
//
// Mutations: event_filter_term() quoting a field's segments with
// quote_literal() instead of to_jsonb() fails it (a field named data."q
// compiles to a path that matches nothing, so the agreement fails); the
// same without event_filter_jsonpath()'s exception guard fails it when
// the filter is stored (a jsonpath syntax error). fan_out_destinations()
// matching with silent => false does not fail it: the compiler puts
// every comparison inside exists(), which lax mode never raises in; the
// guard of the promise is the compiler's shape, which this test holds.
func TestNoStoredFilterFailsAPublish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	schema := f.ob.Schema()
	acme := f.create(t, "acme", "order.*")
	insert := `INSERT INTO ` + schema + `.destinations (id, tenant, url, filter, revision) VALUES ($1, 'hostile', 'https://hostile.example/', $2::jsonb, 0)`
	huge := map[string]any{}
	for i := range 5000 {
		huge[fmt.Sprintf("data.f%d", i)] = map[string]any{"$in": []any{1, 2, 3}}
	}
	deep := any(map[string]any{"data.a": 1})
	for range 200 {
		deep = map[string]any{"$not": deep}
	}
	hostile := []any{huge, deep, "x", 1, []any{1}, nil, map[string]any{"data.a": strings.Repeat("x", 100000)}}
	rng := rand.New(rand.NewPCG(45, 1))
	for range 300 {
		hostile = append(hostile, randomFilter(rng, 0))
	}
	accepted := 0
	for i, h := range hostile {
		doc, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(ctx, insert, fmt.Sprintf("dst_hostile%d", i), string(doc)); err != nil {
			t.Fatalf("storing filter %.200s: %v", doc, err)
		}
		if checked, err := destinations.CheckFilter(doc); err != nil || checked == nil {
			continue
		}
		accepted++
		var never bool
		if err := f.pool.QueryRow(ctx, "SELECT "+schema+".event_filter_jsonpath($1::jsonb)::text = '!(exists ($))'", string(doc)).Scan(&never); err != nil {
			t.Fatal(err)
		}
		if never {
			t.Errorf("CheckFilter accepts %s, which the database compiles to a filter matching nothing", doc)
		}
	}
	if accepted == 0 {
		t.Fatal("no random filter passed CheckFilter: the agreement is not checked")
	}

	tx := f.producerTx(t)
	data := []map[string]any{
		{"account_id": "hostile", "a": []any{1, "x", nil}, "amount": "12", "f1": map[string]any{"b": 1}},
		{"account_id": "hostile", "data": []any{[]any{}}, "type": 5},
		{"account_id": "acme"},
	}
	for i, d := range data {
		if _, err := f.ob.Publish(ctx, tx, outboxd.Event{Type: "order.created", Key: fmt.Sprintf("o-%d", i), Data: d}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	orders, perDestination := f.committed(t, tx)
	if orders != 1 || perDestination[acme.ID] != 1 {
		t.Fatalf("after commit: %d order rows, destination rows %v; want the order and 1 row of %s", orders, perDestination, acme.ID)
	}
}

// FuzzFilter holds the filter checker and the database's compiler to
// their promises for any document and any event: CheckFilter never
// panics and accepts only documents within MaxFilterBytes;
// event_filter_jsonpath() and the match never error, whatever they are
// given; and a filter CheckFilter accepts compiles to a predicate that
// can match (not the one matching nothing). (make fuzz runs it; its
// seeds run with the tests.)
//
// Mutation: event_filter_term() accepting only "data." fields (not
// "type") fails it on the type seed: CheckFilter accepts it and the
// database compiles it to the predicate matching nothing.
func FuzzFilter(f *testing.F) {
	pool, ob := testdb.New(f)
	for _, seed := range [][2]string{
		{`{"type": "invoice.paid", "data.amount": {"$gt": 1000}}`, `{"type": "invoice.paid", "data": {"amount": 1001}}`},
		{`{"$or": [{"data.a": {"$in": [1, "x", null]}}, {"$not": {"data.b": {"$exists": true}}}]}`, `{"data": {"a": [1]}}`},
		{`{"data.a": {"$prefix": "\"'\\"}}`, `{"data": {"a": "\"'\\x"}}`},
		{`{"data..a": 1}`, `{}`},
		{`{"$and": []}`, `[]`},
		{`[1, 2]`, `"x"`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, filter, event string) {
		checked, checkErr := destinations.CheckFilter(json.RawMessage(filter))
		if checkErr == nil && len(checked) > destinations.MaxFilterBytes {
			t.Fatalf("CheckFilter accepted %d bytes", len(checked))
		}
		if !json.Valid([]byte(filter)) || !json.Valid([]byte(event)) || !utf8.ValidString(filter+event) || strings.Contains(filter+event, `\u0000`) {
			t.Skip("PostgreSQL's jsonb holds valid JSON in UTF-8 without NUL")
		}
		var never *bool
		if err := pool.QueryRow(t.Context(), "SELECT "+ob.Schema()+".event_filter_jsonpath($1::jsonb)::text = '!(exists ($))'", filter).Scan(&never); err != nil {
			t.Fatalf("event_filter_jsonpath(%s): %v", filter, err)
		}
		if checkErr == nil && checked != nil && (never == nil || *never) {
			t.Fatalf("CheckFilter accepts %s, which the database compiles to no filter or to one matching nothing", filter)
		}
		if _, err := sqlFilterMatch(t.Context(), pool, ob.Schema(), []string{filter}, []string{event}); err != nil {
			t.Fatalf("filter %s, event %s: %v", filter, event, err)
		}
	})
}
