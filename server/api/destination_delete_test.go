package api

import (
	"fmt"
	"net/http"
	"testing"
)

// TestDestinationDeleteDryRunCounts: DELETE .../destinations/{id}
// ?dry_run=true counts the rows waiting for the destination and deletes
// nothing (it and its rows are still there); a dry_run that is not a
// boolean is refused (400); the delete then takes the rows counted.
//
// Mutation, failing this test: removeDestination ignoring dry_run (the
// dry run deletes the destination, the GET after it answers 404).
func TestDestinationDeleteDryRunCounts(t *testing.T) {
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
	for _, key := range []string{"w-1", "w-2"} {
		body := fmt.Sprintf(`{"sink":"customers","destination":%q,"dedup_key":%q,"payload":{}}`, created.ID, key)
		if got := a.do(t, http.MethodPost, "/v1/messages", operatorToken, body, nil); got != http.StatusCreated {
			t.Fatalf("enqueue %s: %d", key, got)
		}
	}
	var plan map[string]any
	if got := a.do(t, http.MethodDelete, one+"?dry_run=true", operatorToken, "", &plan); got != http.StatusOK ||
		plan["id"] != created.ID || plan["rows"] != 2.0 || plan["dry_run"] != true {
		t.Fatalf("dry run: %d %v; want 200 counting the 2 waiting rows", got, plan)
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
	var done map[string]any
	if got := a.do(t, http.MethodDelete, one, operatorToken, "", &done); got != http.StatusOK || done["rows"] != 2.0 || done["dry_run"] != nil {
		t.Errorf("delete: %d %v; want the 2 rows counted, no dry_run", got, done)
	}
}
