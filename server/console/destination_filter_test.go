package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/server/console"
)

// TestDestinationFormsSetAndShowTheFilter: the console's create form
// takes a payload filter, the destination's page shows it, the edit form
// holds it, a refused one answers 422 naming its path and changes
// nothing, and an empty field removes it; the same in the tenant's
// portal.
//
// Mutation: readDestinationForm not reading the filter field fails it
// (the page says "none").
func TestDestinationFormsSetAndShowTheFilter(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer()}, withDestinations(sealingKey))
	b := s.browser(t)
	b.SignIn(token)
	b.Get("/")
	resp, page := b.Post("/destinations", url.Values{"tenant": {"acme"}, "url": {"https://hooks.acme.example/big"},
		"events": {"invoice.*"}, "filter": {`{"data.amount": {"$gt": 1000}}`}})
	id := regexp.MustCompile(`href="/tenants/acme/destinations/(dst_[a-z2-7]+)"`).FindStringSubmatch(page)
	if resp.StatusCode != http.StatusCreated || id == nil {
		t.Fatalf("create: %d\n%s", resp.StatusCode, page)
	}
	one := "/tenants/acme/destinations/" + id[1]
	if _, page := b.Get(one); !strings.Contains(page, `id="filter">{
  &#34;data.amount&#34;: {`) || !strings.Contains(page, `name="filter" size="44" value="{&#34;data.amount&#34;: {&#34;$gt&#34;: 1000}}"`) {
		t.Errorf("the destination's page does not show the filter, or its form does not hold it:\n%s", page)
	}
	resp, page = b.Post(one+"/edit", url.Values{"url": {"https://hooks.acme.example/big"}, "filter": {`{"$or": [{"type": "x"}, {"data.a": {"$in": []}}]}`}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "filter.$or[1].data.a.$in") {
		t.Errorf("an edit with a bad filter: %d\n%s", resp.StatusCode, page)
	}
	if d, _ := s.get(t, "acme", id[1]); string(d.Filter) != `{"data.amount": {"$gt": 1000}}` {
		t.Errorf("a refused edit left the filter %s", d.Filter)
	}
	b.Post(one+"/edit", url.Values{"url": {"https://hooks.acme.example/big"}, "filter": {""}})
	if d, _ := s.get(t, "acme", id[1]); d.Filter != nil {
		t.Errorf("an empty filter field left the filter %s", d.Filter)
	}
	if _, page := b.Get(one); !strings.Contains(page, `id="filter">none`) {
		t.Errorf("without a filter the page does not say so:\n%s", page)
	}
	// The tenant's portal: its edit form sets the filter, its page shows
	// it, a refused one is a 422 naming the path.
	p := s.openPortal(t, "acme")
	mine := "/portal/destinations/" + id[1]
	p.Post(mine+"/edit", url.Values{"url": {"https://hooks.acme.example/big"}, "filter": {`{"data.currency": "EUR"}`}})
	if _, page := p.Get(mine); !strings.Contains(page, `id="filter">{
  &#34;data.currency&#34;: &#34;EUR&#34;
}`) {
		t.Errorf("the portal's page of the destination does not show the filter set in the portal:\n%s", page)
	}
	if resp, page := p.Post(mine+"/edit", url.Values{"url": {"https://hooks.acme.example/big"}, "filter": {`{"data.x": {"$gt": null}}`}}); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(page, "filter.data.x.$gt") {
		t.Errorf("a bad filter in the portal: %d\n%s", resp.StatusCode, page)
	}
}
