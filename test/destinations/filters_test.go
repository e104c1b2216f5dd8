package destinations_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestFilteredDestinationReceivesOnlyMatchingEvents (issue 45 item 1)
// runs the real binary: a destination created with `outboxd destinations
// create --filter` receives, of the invoices published in one producer's
// transaction, only those its filter matches, while the tenant's
// unfiltered destination receives them all; the filter is shown by the
// API; a filter refused on create or update through the API answers 422
// naming the path, a hostile (deep) one included, and changes nothing.
//
// Mutation: the CLI not passing --filter to the spec (Filter left
// empty) fails it: GET shows no filter, and the endpoint is sent every
// invoice.
func TestFilteredDestinationReceivesOnlyMatchingEvents(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	o := serve(t, setup{poll: "200ms"})
	all := o.create(t, rcv, "acme-all", "invoice.*")
	var big destinations.Created
	out := o.run(t, "destinations", "create", "--tenant", "acme", "--url", rcv.URL+"/acme", "--events", "invoice.*",
		"--filter", `{"data.amount": {"$gt": 1000}, "data.currency": {"$in": ["EUR", "CHF"]}}`, "-o", "json")
	if err := json.Unmarshal([]byte(out), &big); err != nil {
		t.Fatalf("destinations create -o json: %v in %s", err, out)
	}

	// One producer's transaction: two tenants, three invoices for acme.
	tx, err := o.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	for _, e := range []struct{ tenant, order, data string }{
		{"acme", "small", `"amount": 40, "currency": "EUR"`},
		{"acme", "dollars", `"amount": 4000, "currency": "USD"`},
		{"acme", "large", `"amount": 4000, "currency": "EUR"`},
		{"acme-all", "small", `"amount": 40, "currency": "EUR"`},
		{"acme-all", "large", `"amount": 4000, "currency": "EUR"`},
	} {
		data := `{"account_id": "` + e.tenant + `", "order": "` + e.order + `", ` + e.data + `}`
		if _, err := tx.Exec(t.Context(), `SELECT * FROM `+o.schema+`.publish('invoice.paid', $1, $2::jsonb)`, e.tenant+"-"+e.order, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, deliveryTimeout, "the large invoice at the filtered endpoint and both at the unfiltered one", func() bool {
		_, large := rcv.at("/acme")["large"]
		return large && rcv.count("/acme-all") == 2
	})
	var rows int
	if err := o.pool.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT headers FROM `+o.schema+`.messages UNION ALL SELECT headers FROM `+o.schema+`.messages_history) m
		WHERE headers->>'outboxd-destination' = $1`, big.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if got := rcv.at("/acme"); rows != 1 || len(got) != 1 {
		t.Errorf("the filtered destination has %d rows (open or in history) and received %d events; want the large EUR invoice only", rows, len(got))
	}
	if rcv.count("/acme-all") != 2 || all.ID == "" {
		t.Errorf("the unfiltered destination received %d events; want 2", rcv.count("/acme-all"))
	}

	var shown destinations.Destination
	o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+big.ID, nil, &shown)
	if want := `{"data.amount":{"$gt":1000},"data.currency":{"$in":["EUR","CHF"]}}`; string(shown.Filter) != want {
		t.Errorf("GET shows filter %s; want %s", shown.Filter, want)
	}

	deep := `{"data.a": 1}`
	for range destinations.MaxFilterDepth {
		deep = `{"$not": ` + deep + `}`
	}
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodPatch, "/v1/tenants/acme/destinations/" + big.ID,
			`{"filter": {"$and": [{"type": "invoice.paid"}, {"data.amount": {"$gt": [1000]}}]}}`, "filter.$and[1].data.amount.$gt"},
		{http.MethodPost, "/v1/tenants/acme/destinations", `{"url": "` + rcv.URL + `/x", "filter": ` + deep + `}`, "filter.$not.$not.$not.$not"},
		{http.MethodPost, "/v1/tenants/acme/destinations", `{"url": "` + rcv.URL + `/x", "filter": {"data.a": "` + strings.Repeat("x", 5000) + `"}}`, "filter is"},
	} {
		status, body := rawCall(t, o, c.method, c.path, c.body)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, c.want) {
			t.Errorf("%s %s with a bad filter: %d %s; want 422 naming %s", c.method, c.path, status, body, c.want)
		}
	}
	o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+big.ID, nil, &shown)
	if !strings.Contains(string(shown.Filter), `"$gt":1000`) {
		t.Errorf("a refused update changed the filter to %s", shown.Filter)
	}
}

// rawCall sends body to the API and returns the answer's status and body.
func rawCall(t *testing.T, o *outbox, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, o.api+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
