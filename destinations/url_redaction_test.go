package destinations_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// Every reader of the store sees a destination's URL with its credentials
// redacted (create's answer, list, get, update's answer, their JSON), the
// tenant's own edit form reads it whole (OwnURL), and the redacted URL
// sent back unchanged, as an edit form does, keeps the credentials.
// (Mutations: Get without shown() leaks the password; Patch.apply taking
// the redacted URL as a new one stores REDACTED.)
func TestDestinationURLCredentialsAreRedactedForReaders(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring("k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		t.Fatal(err)
	}
	st := ob.Destinations(keys)
	const full = "https://acme:hunter2@hooks.acme.example/in?token=s3cret&team=blue"
	c, err := st.Create(t.Context(), pool, testdb.Actor, "acme", destinations.Spec{URL: full})
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := st.List(t.Context(), pool, "acme", "", 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	got, err := st.Get(t.Context(), pool, "acme", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	shownURL := got.URL
	desc := "changed"
	updated, err := st.Update(t.Context(), pool, testdb.Actor, "acme", c.ID, destinations.Patch{URL: &shownURL, Description: &desc})
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]destinations.Destination{"create": c.Destination, "list": list[0], "get": got, "update": updated} {
		b, _ := json.Marshal(d)
		if strings.Contains(d.URL, "hunter2") || strings.Contains(d.URL, "s3cret") || strings.Contains(string(b), "hunter2") ||
			!strings.Contains(d.URL, "team=blue") {
			t.Errorf("%s shows %q (%s), want the credentials redacted and the rest kept", name, d.URL, b)
		}
	}
	again, err := st.Get(t.Context(), pool, "acme", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.OwnURL() != full {
		t.Errorf("after sending the shown URL back, the URL is %q, want %q kept", again.OwnURL(), full)
	}
}
