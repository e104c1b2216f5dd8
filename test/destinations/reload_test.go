package destinations_test

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
)

// TestReloadMovesTheDoorWithTheConfiguration: the destinations and
// event_types blocks of a reloaded plugins.yaml apply from the reload on,
// in the API and in the tenant's portal alike. serve starts with
// endpoints_per_tenant 1 and private addresses allowed, so acme's second
// endpoint is refused by both; POST /-/reload of a file with 3 and
// private addresses refused then lets a public endpoint in through each,
// and refuses a loopback one; its new event_types entry is offered by
// the portal's catalog and the API's.
//
// Mutations checked, each failing it: install calling followConfig for
// the first configuration only (the store keeps the quotas and policy
// serve started with, as before this test): every create after the
// reload is refused by the quota of 1; install without the console's
// Reconfigure: the portal's catalog lacks invoice.paid.
func TestReloadMovesTheDoorWithTheConfiguration(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	o := serve(t, setup{strict: true, top: "destinations: {quotas: {endpoints_per_tenant: 1}, network: {allow_private: true}}\n"})
	o.create(t, rcv, "acme")
	quota := destinations.KeyEndpointsPerTenant + ": 1"
	if code, _, body := o.post(t, "/v1/tenants/acme/destinations", `{"url": "https://203.0.113.7/api"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, quota) {
		t.Fatalf("acme's second endpoint through the API: %d %s; want 422 naming %q", code, body, quota)
	}
	portal := o.openPortal(t, "acme")
	csrf := portal.csrf("/portal/")
	if code, body := portal.post("/portal/destinations", url.Values{"csrf": {csrf}, "url": {"https://203.0.113.8/portal"}}); code != http.StatusUnprocessableEntity || !strings.Contains(body, quota) {
		t.Fatalf("acme's second endpoint through the portal: %d; want 422 naming %q\n%s", code, quota, body)
	}

	raw, err := os.ReadFile(o.config)
	if err != nil {
		t.Fatal(err)
	}
	reloaded := strings.NewReplacer("endpoints_per_tenant: 1", "endpoints_per_tenant: 3", "allow_private: true", "allow_private: false").Replace(string(raw)) +
		"event_types:\n  - {name: invoice.paid, description: an invoice was paid, example: {amount: 12}}\n"
	if strings.Contains(portal.get("/portal/event-types"), "invoice.paid") {
		t.Fatal("the portal's catalog offers invoice.paid before the reload declares it")
	}
	if err := os.WriteFile(o.config, []byte(reloaded), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, body := o.post(t, "/-/reload", ""); code != http.StatusOK {
		t.Fatalf("POST /-/reload: %d %s", code, body)
	}

	if code, _, body := o.post(t, "/v1/tenants/acme/destinations", `{"url": "https://203.0.113.7/api"}`); code != http.StatusCreated {
		t.Errorf("a public endpoint through the API after the reload: %d %s; want 201", code, body)
	}
	if code, body := portal.post("/portal/destinations", url.Values{"csrf": {csrf}, "url": {"https://203.0.113.8/portal"}}); code != http.StatusCreated {
		t.Errorf("a public endpoint through the portal after the reload: %d; want 201\n%s", code, body)
	}
	if code, _, body := o.post(t, "/v1/tenants/acme/destinations", `{"url": "`+rcv.URL+`/acme"}`); code != http.StatusUnprocessableEntity || !strings.Contains(body, "url: ") {
		t.Errorf("a loopback endpoint through the API after the reload: %d %s; want 422 naming url", code, body)
	}
	if page := portal.get("/portal/event-types"); !strings.Contains(page, "invoice.paid") {
		t.Errorf("the portal's catalog after the reload does not offer invoice.paid:\n%s", page)
	}
	var catalog struct {
		EventTypes []struct{ Name string } `json:"event_types"`
	}
	o.call(t, http.MethodGet, "/v1/tenants/acme/event-types", nil, &catalog)
	if len(catalog.EventTypes) == 0 || catalog.EventTypes[0].Name != "invoice.paid" {
		t.Errorf("the API's catalog after the reload: %+v; want invoice.paid first", catalog.EventTypes)
	}
	if len(o.list(t, "acme")) != 3 {
		t.Errorf("acme has %d destinations, want 3", len(o.list(t, "acme")))
	}
}
