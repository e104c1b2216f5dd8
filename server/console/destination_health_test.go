package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
)

// withCatalog gives the site a catalog of one operator's event type and
// outboxd's operational events.
func withCatalog(opt *console.Options, _ *testdb.Outbox) {
	opt.EventTypes = append(destinations.Catalog{{Name: "invoice.paid", Description: "An invoice was paid in full.",
		Example: json.RawMessage(`{"invoice":"inv_1","amount":1200}`)}}, destinations.OperationalEventTypes()...)
}

// A tenant's portal shows an endpoint's health and its figures of the
// last 24 hours, offers the catalog in the subscription form (a checked
// type subscribes) and as a page, sends a test event of a catalog type
// with its example, and keeps the operator's metadata: shown, not in the
// form, and left as it is by an edit that posts some. No page a tenant
// looks at names a sink, a route or the operator's words ("Waiting rows",
// "the sink's default").
// (Mutations, each failing this test: editDestination passing the form's
// metadata in the portal (the metadata changes); withCatalogChoices
// ignoring the checkboxes (the endpoint is not subscribed to
// invoice.paid); sendTestEvent always sending outboxd.test; the portal's
// rate limit in the operator's words.)
func TestPortalShowsHealthCatalogAndKeepsMetadata(t *testing.T) {
	s := newSite(t, console.Options{Access: adminToken()}, withDestinations(sealingKey), withCatalog)
	c, err := s.store(t).Create(s.ctx, s.pool, testdb.Actor, "acme", destinations.Spec{URL: "https://acme.example/hook",
		Description: "acme production", Metadata: json.RawMessage(`{"plan":"gold"}`)})
	if err != nil {
		t.Fatal(err)
	}
	b := s.openPortal(t, "acme")
	one := "/portal/destinations/" + c.ID
	_, page := b.Get(one)
	for _, want := range []string{`id="health" data-state="healthy"`, `id="health-state">Healthy`, `id="stats-delivered">0`,
		`value="invoice.paid"`, `value="outboxd.destination.failing"`, `(kept by your provider)`, `plan`} {
		if !strings.Contains(page, want) {
			t.Errorf("the endpoint's page does not show %s:\n%s", want, page)
		}
	}
	_, list := b.Get("/portal/")
	_, catalog := b.Get("/portal/event-types")
	if !strings.Contains(catalog, `data-type="invoice.paid"`) || !strings.Contains(catalog, "inv_1") || !strings.Contains(catalog, `data-type="outboxd.destination.disabled"`) {
		t.Errorf("the catalog page:\n%s", catalog)
	}
	for name, p := range map[string]string{"endpoint": page, "list": list, "catalog": catalog} {
		for _, internal := range []string{"customers", "Waiting rows", "the sink's default", "sink", "route"} {
			if strings.Contains(strings.ToLower(p), strings.ToLower(internal)) {
				t.Errorf("the portal's %s page says %q", name, internal)
			}
		}
		if strings.Contains(p, `name="metadata"`) {
			t.Errorf("the portal's %s page offers to edit the metadata", name)
		}
	}

	// An edit subscribing through the catalog, with metadata posted by
	// hand: the metadata stays the operator's.
	resp, body := b.Post(one+"/edit", url.Values{"url": {"https://acme.example/hook"}, "events": {"order.*"},
		"event_type": {"invoice.paid", "outboxd.destination.*"}, "metadata": {`{"plan":"free"}`}})
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", resp.StatusCode, body)
	}
	d, _ := s.get(t, "acme", c.ID)
	if string(d.Metadata) != `{"plan": "gold"}` && string(d.Metadata) != `{"plan":"gold"}` {
		t.Errorf("metadata after the tenant's edit: %s, want the operator's", d.Metadata)
	}
	if strings.Join(d.Events, ",") != "order.*,invoice.paid,outboxd.destination.*" {
		t.Errorf("events after the edit: %v", d.Events)
	}

	// A test event of a catalog type carries its example.
	_, done := b.Post(one+"/test", url.Values{"type": {"invoice.paid"}})
	if !strings.Contains(done, "type invoice.paid") {
		t.Fatalf("the test event:\n%s", done)
	}
	var payload []byte
	if err := s.pool.QueryRow(s.ctx, `SELECT payload::text FROM "`+s.ob.Schema()+`".messages WHERE headers->>'outboxd-destination' = $1 AND payload->>'type' = 'invoice.paid'`, c.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var event struct {
		Data struct{ Invoice string }
	}
	if err := json.Unmarshal(payload, &event); err != nil || event.Data.Invoice != "inv_1" {
		t.Errorf("the test event's payload %s, want the example as data", payload)
	}
	if resp, _ := b.Post(one+"/test", url.Values{"type": {"invoice.lost"}}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a test event of a type not in the catalog: %d, want 422", resp.StatusCode)
	}
}
