package api

import (
	"fmt"
	"net/http"
	"testing"
)

// TestDestinationDeleteIsCountedThenConfirmed: DELETE .../destinations/{id}
// ?dry_run=true counts the rows waiting for the destination, deletes
// nothing (it and its rows are still there) and answers a token; a delete
// without a token is refused (422) and one with a token that is not a
// boolean dry_run is 400; after another row arrives the token deletes
// nothing and answers 409 with the new count and token, which then delete
// the destination with the rows counted.
//
// Mutations, each failing this test: removeDestination deleting without a
// token (the bare DELETE answers 200); removeDestination answering no
// token in its dry run (the confirmation cannot be made).
func TestDestinationDeleteIsCountedThenConfirmed(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		api.Destinations = api.Outbox.Destinations(newKeyring(t))
	})
	const base = "/v1/tenants/acme/destinations"
	var created struct{ ID string }
	if got := a.do(t, http.MethodPost, base, operatorToken, `{"url":"https://hooks.acme.example/outboxd"}`, &created); got != http.StatusCreated {
		t.Fatalf("create: %d", got)
	}
	one := base + "/" + created.ID
	enqueue := func(key string) {
		t.Helper()
		body := fmt.Sprintf(`{"sink":"customers","destination":%q,"dedup_key":%q,"payload":{}}`, created.ID, key)
		if got := a.do(t, http.MethodPost, "/v1/messages", operatorToken, body, nil); got != http.StatusCreated {
			t.Fatalf("enqueue %s: %d", key, got)
		}
	}
	enqueue("w-1")
	enqueue("w-2")
	var plan DestinationChange
	if got := a.do(t, http.MethodDelete, one+"?dry_run=true", operatorToken, "", &plan); got != http.StatusOK ||
		plan.ID != created.ID || plan.Rows != 2 || !plan.DryRun || plan.Token == "" {
		t.Fatalf("dry run: %d %+v; want 200 counting the 2 waiting rows with a token", got, plan)
	}
	var d struct{ Waiting int }
	if got := a.do(t, http.MethodGet, one, operatorToken, "", &d); got != http.StatusOK || d.Waiting != 2 {
		t.Fatalf("after the dry run: %d, %d waiting; want the destination and its 2 rows still there", got, d.Waiting)
	}
	if got := a.do(t, http.MethodDelete, one+"?dry_run=yes", operatorToken, "", nil); got != http.StatusBadRequest {
		t.Errorf("dry_run=yes: %d, want 400", got)
	}
	if got := a.do(t, http.MethodDelete, base+"/dst_nope?dry_run=true", operatorToken, "", nil); got != http.StatusNotFound {
		t.Errorf("dry run of an unknown destination: %d, want 404", got)
	}
	if got := a.do(t, http.MethodDelete, one, operatorToken, "", nil); got != http.StatusUnprocessableEntity {
		t.Fatalf("a delete without a token: %d, want 422", got)
	}
	enqueue("w-3")
	var changed struct {
		Rows  int64
		Token string
	}
	if got := a.do(t, http.MethodDelete, one+"?token="+plan.Token, operatorToken, "", &changed); got != http.StatusConflict ||
		changed.Rows != 3 || changed.Token == "" || changed.Token == plan.Token {
		t.Fatalf("the stale token: %d %+v; want 409 with the 3 rows and a new token", got, changed)
	}
	var done DestinationChange
	if got := a.do(t, http.MethodDelete, one+"?token="+changed.Token, operatorToken, "", &done); got != http.StatusOK || done.Rows != 3 || done.DryRun {
		t.Errorf("delete: %d %+v; want the 3 rows counted, no dry_run", got, done)
	}
}
