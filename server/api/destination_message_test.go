package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestMessageForOneDestination: POST /v1/messages with a destination
// enqueues through enqueue_destination(): the row carries the
// destination and its ordering key is the destination's, a disabled
// destination's row waits, the same dedup key answers 200 with the same
// id; an unknown destination, or a sink that is not of type destinations,
// answers 422 naming the problem, and nothing is stored for them.
//
// Mutations, each failing this test: postMessage ignoring destination
// (calling Enqueue: no header, and the unknown destination stored);
// decodeMessageRequest not checking the sink's type (the webhook sink's
// message stored, 201).
func TestMessageForOneDestination(t *testing.T) {
	t.Parallel()
	var st *destinations.Store
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		st = api.Outbox.Destinations(newKeyring(t))
		api.Destinations = st
	})
	d, err := st.Create(a.ctx, a.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://hooks.acme.example/outboxd"})
	if err != nil {
		t.Fatal(err)
	}
	off, err := st.Create(a.ctx, a.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://hooks.acme.example/off"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetEnabled(a.ctx, a.pool, testdb.Actor, "acme", off.ID, false, "moving"); err != nil {
		t.Fatal(err)
	}
	body := func(sink, destination, key string) string {
		return fmt.Sprintf(`{"sink":%q,"destination":%q,"dedup_key":%q,"payload":{"hello":"acme"},"ordering_key":"onboarding"}`, sink, destination, key)
	}

	var first, again struct {
		ID      int64
		Created bool
	}
	if got := a.do(t, "POST", "/v1/messages", operatorToken, body("customers", d.ID, "welcome"), &first); got != http.StatusCreated || !first.Created {
		t.Fatalf("a message for %s: %d %+v", d.ID, got, first)
	}
	if got := a.do(t, "POST", "/v1/messages", operatorToken, body("customers", d.ID, "welcome"), &again); got != http.StatusOK || again.ID != first.ID {
		t.Errorf("the same message again: %d %+v; want 200 with id %d", got, again, first.ID)
	}
	if got := a.do(t, "POST", "/v1/messages", operatorToken, body("customers", off.ID, "welcome-off"), nil); got != http.StatusCreated {
		t.Errorf("a message for the disabled %s: %d", off.ID, got)
	}
	for _, tc := range []struct{ body, says string }{
		{body("customers", "dst_nope", "nope"), `no destination \"dst_nope\"`},
		{body("partner", d.ID, "partner"), `sink \"partner\" does not deliver to destinations; the sinks that do: customers`},
	} {
		resp, raw := a.send(t, "POST", "/v1/messages", operatorToken, tc.body)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(raw), tc.says) {
			t.Errorf("%s: %d %s; want 422 saying %s", tc.body, resp.StatusCode, raw, tc.says)
		}
	}

	rows, err := a.pool.Query(a.ctx, `SELECT dedup_key, coalesce(headers->>'outboxd-destination', ''), coalesce(ordering_key, ''), available_at = 'infinity'
		FROM `+a.ob.Schema()+`.messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var key, dest, ordering string
		var waiting bool
		if err := rows.Scan(&key, &dest, &ordering, &waiting); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %t", key, dest, ordering, waiting))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("welcome %s customers/%s/onboarding false", d.ID, d.ID),
		fmt.Sprintf("welcome-off %s customers/%s/onboarding true", off.ID, off.ID),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPurgeOneDestinationsWaitingRowsOverHTTP: POST /v1/dlq/purge with a
// destination counts the rows waiting on it (a dry run deletes nothing)
// and deletes exactly them with the dry run's token, leaving another
// destination's; a redrive by destination, or ids with a destination,
// answer 422.
//
// Mutations, each failing this test: deadLetterActionRequest.filter not
// passing destination on (the purge selects every waiting row of the
// sink: 3, not 2); CheckSelection accepting ids with a destination.
func TestPurgeOneDestinationsWaitingRowsOverHTTP(t *testing.T) {
	t.Parallel()
	var st *destinations.Store
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		st = api.Outbox.Destinations(newKeyring(t))
		api.Destinations = st
	})
	var ids []string
	for _, url := range []string{"https://hooks.acme.example/old", "https://hooks.acme.example/new"} {
		d, err := st.Create(a.ctx, a.pool, testdb.Actor, "acme", destinations.Spec{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SetEnabled(a.ctx, a.pool, testdb.Actor, "acme", d.ID, false, "away"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	for i, id := range []string{ids[0], ids[0], ids[1]} {
		body := fmt.Sprintf(`{"sink":"customers","destination":%q,"dedup_key":"n-%d","payload":{}}`, id, i)
		if got := a.do(t, "POST", "/v1/messages", operatorToken, body, nil); got != http.StatusCreated {
			t.Fatalf("enqueue for %s: %d", id, got)
		}
	}
	selection := fmt.Sprintf(`"all":true,"waiting":true,"sink":"customers","destination":%q`, ids[0])
	var plan, done map[string]any
	if got := a.do(t, "POST", "/v1/dlq/purge", operatorToken, "{"+selection+`,"dry_run":true}`, &plan); got != http.StatusOK || plan["purged"] != 2.0 {
		t.Fatalf("dry run: %d %v; want 2", got, plan)
	}
	if c := testdb.StatusCounts(t, a.pool, a.ob, "customers"); c["pending"] != 3 {
		t.Fatalf("the dry run changed rows: %v", c)
	}
	if got := a.do(t, "POST", "/v1/dlq/purge", operatorToken, fmt.Sprintf(`{%s,"token":%q}`, selection, plan["token"]), &done); got != http.StatusOK || done["purged"] != 2.0 {
		t.Fatalf("confirmed purge: %d %v; want 2", got, done)
	}
	var left string
	if err := a.pool.QueryRow(a.ctx, `SELECT string_agg(headers->>'outboxd-destination', ',') FROM `+a.ob.Schema()+`.messages`).Scan(&left); err != nil || left != ids[1] {
		t.Errorf("rows left: %q (%v); want the one of %s", left, err, ids[1])
	}
	for path, body := range map[string]string{
		"/v1/dlq/redrive": fmt.Sprintf(`{"all":true,"destination":%q}`, ids[1]),
		"/v1/dlq/purge":   fmt.Sprintf(`{"ids":[1],"destination":%q}`, ids[1]),
	} {
		if got := a.do(t, "POST", path, operatorToken, body, nil); got != http.StatusUnprocessableEntity {
			t.Errorf("%s %s: %d, want 422", path, body, got)
		}
	}
}
