package console_test

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/portal"
)

// sealingKey is a fixed key in destinations.EnvSecretsKey's form.
const sealingKey = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// viewerToken is a token of the read role, named viewer.
const viewerToken = "console-viewer-token"

// adminAndViewer are an admin's token (http.token) and viewer's.
func adminAndViewer() *access.Authenticator {
	return access.New([]access.Token{access.TokenOf(access.LegacyTokenName, token, access.RoleAdmin),
		access.TokenOf("viewer", viewerToken, access.RoleRead)}, nil)
}

// withDestinations gives a site's console a destinations store sealing
// under keys (EnvSecretsKey's form), the portal's links signed with them
// and a destinations sink, customers, for test events.
func withDestinations(keys string) func(*console.Options, *testdb.Outbox) {
	return func(opt *console.Options, ob *testdb.Outbox) {
		ring, err := destinations.ParseKeyring(keys)
		if err != nil {
			panic(err)
		}
		opt.Destinations = ob.Destinations(ring)
		if opt.Portal, err = portal.NewLinks(ring); err != nil {
			panic(err)
		}
		opt.TestEventSink = "customers"
	}
}

// store is the site's destinations store.
func (s *site) store(t *testing.T) *destinations.Store {
	t.Helper()
	ring, err := destinations.ParseKeyring(sealingKey)
	if err != nil {
		t.Fatal(err)
	}
	return s.ob.Destinations(ring)
}

// create makes a destination of tenant with the store.
func (s *site) create(t *testing.T, tenant string) destinations.Created {
	t.Helper()
	c, err := s.store(t).Create(s.ctx, s.pool, testdb.Actor, tenant, destinations.Spec{URL: "https://" + tenant + ".example/hook", Description: tenant + " production"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get reads destination id of tenant; found is false once it is gone.
func (s *site) get(t *testing.T, tenant, id string) (destinations.Destination, bool) {
	t.Helper()
	d, err := s.store(t).Get(s.ctx, s.pool, tenant, id)
	if errors.Is(err, destinations.ErrNotFound) {
		return d, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return d, true
}

var secretOnPage = regexp.MustCompile(`<pre class="secret" id="secret">(whsec_[^<]+)</pre>`)

// An operator lists destinations (every tenant's, or one tenant's),
// creates one from the form and sees its secret once, opens its page
// (fields, waiting rows, deliveries with every failed attempt), edits,
// disables with a reason, enables, rotates its secret (shown once), sends
// a test event, redrives its dead delivery, and deletes it after a
// confirmation saying how many waiting rows go with it. The navigation
// links the list.
// (Mutations, each failing this test: the list reading every tenant's
// whatever ?tenant= says; deleteDestination deleting without confirm=yes;
// the destination page without its failed attempts; redriveDestination
// without the Redrive call; the layout without the Destinations link.)
func TestDestinationPagesListInspectAndChange(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer()}, withDestinations(sealingKey))
	other := s.create(t, "globex")
	b := s.browser(t)
	b.SignIn(token)

	_, page := b.Get("/")
	if !strings.Contains(page, `href="/destinations" id="nav-destinations"`) {
		t.Fatal("the navigation does not link the destinations")
	}
	resp, page := b.Post("/destinations", url.Values{"tenant": {"acme"}, "url": {"https://hooks.acme.example/outboxd"},
		"events": {"order.*, invoice.paid"}, "description": {"acme <production>"}, "rate_limit": {"5"}, "metadata": {`{"plan": "pro"}`}})
	m := secretOnPage.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusCreated || m == nil {
		t.Fatalf("create: %d\n%s", resp.StatusCode, page)
	}
	id := regexp.MustCompile(`href="/tenants/acme/destinations/(dst_[a-z2-7]+)"`).FindStringSubmatch(page)
	if id == nil {
		t.Fatalf("the created page does not link the destination:\n%s", page)
	}
	one := "/tenants/acme/destinations/" + id[1]
	if _, page := b.Get(one); strings.Contains(page, m[1]) {
		t.Error("the destination's page shows its secret again")
	}

	_, all := b.Get("/destinations")
	_, acme := b.Get("/destinations?tenant=acme")
	if !strings.Contains(all, id[1]) || !strings.Contains(all, other.ID) {
		t.Errorf("every tenant's list lacks a destination:\n%s", all)
	}
	if !strings.Contains(acme, id[1]) || strings.Contains(acme, other.ID) {
		t.Errorf("acme's list shows another tenant's destination or lacks its own:\n%s", acme)
	}
	if resp, _ := b.Get("/destinations?tenant=" + url.QueryEscape("bad\x01")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a tenant that is not printable: %d, want 400", resp.StatusCode)
	}
	// A tenant id may hold a slash or a space: its pages' paths escape it.
	odd := s.create(t, "acme/eu west")
	_, list := b.Get("/destinations?tenant=" + url.QueryEscape("acme/eu west"))
	link := regexp.MustCompile(`<a href="([^"]+)">` + odd.ID).FindStringSubmatch(list)
	if link == nil {
		t.Fatalf("no link to %s:\n%s", odd.ID, list)
	}
	if resp, page := b.Get(html.UnescapeString(link[1])); resp.StatusCode != http.StatusOK || !strings.Contains(page, "acme/eu west") {
		t.Errorf("the page of a destination of tenant %q at %s: %d", "acme/eu west", link[1], resp.StatusCode)
	}

	// A delivery that failed twice and died, and one waiting.
	st := s.store(t)
	test, err := st.SendTestEvent(s.ctx, s.pool, testdb.Actor, "acme", id[1], "customers", s.now())
	if err != nil {
		t.Fatal(err)
	}
	s.fail(t, test.MessageID, "HTTP 503: down for maintenance", "HTTP 500: <b>boom</b>")
	if _, err := st.SendTestEvent(s.ctx, s.pool, testdb.Actor, "acme", id[1], "customers", s.now()); err != nil {
		t.Fatal(err)
	}
	_, page = b.Get(one)
	for _, want := range []string{`id="url">https://hooks.acme.example/outboxd<`, `id="events">order.*, invoice.paid<`, `id="description">acme &lt;production&gt;<`,
		`id="rate-limit">5 per second<`, `id="waiting">1<`, "down for maintenance", "HTTP 500: &lt;b&gt;boom&lt;/b&gt;", `&#34;plan&#34;: &#34;pro&#34;`,
		fmt.Sprintf(`<a href="/messages/%d">`, test.MessageID), `data-status="dead"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the destination's page lacks %s", want)
		}
	}

	b.Post(one+"/edit", url.Values{"url": {"https://hooks.acme.example/v2"}, "events": {""}, "description": {"acme v2"}, "metadata": {`{"plan": "team"}`}})
	if d, _ := s.get(t, "acme", id[1]); d.URL != "https://hooks.acme.example/v2" || len(d.Events) != 0 || d.RateLimit == nil || *d.RateLimit != 5 || string(d.Metadata) != `{"plan": "team"}` {
		t.Errorf("after the edit: %+v (an empty rate limit keeps it)", d)
	}
	if resp, page := b.Post(one+"/edit", url.Values{"url": {"ftp://hooks.acme.example/"}}); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "url") {
		t.Errorf("an edit to an ftp URL: %d\n%s", resp.StatusCode, page)
	}
	b.Post(one+"/disable", url.Values{"reason": {"endpoint moving"}})
	if _, page := b.Get(one); !strings.Contains(page, `id="disabled-reason">endpoint moving<`) || !strings.Contains(page, `id="enable"`) {
		t.Errorf("disabled, the page does not say why or offer enabling:\n%s", page)
	}
	b.Post(one+"/enable", url.Values{})
	if d, _ := s.get(t, "acme", id[1]); !d.Enabled {
		t.Error("enable did not enable")
	}
	_, page = b.Post(one+"/rotate-secret", url.Values{"overlap": {"1h"}})
	if n := secretOnPage.FindStringSubmatch(page); n == nil || n[1] == m[1] {
		t.Errorf("rotate did not show a new secret:\n%s", page)
	}
	_, page = b.Post(one+"/test", url.Values{})
	if !strings.Contains(page, destinations.TestEventType) {
		t.Errorf("test event page:\n%s", page)
	}
	_, page = b.Post(one+"/redrive", url.Values{})
	if !strings.Contains(page, `<strong id="redrive-count">1</strong>`) || s.status(t, test.MessageID) != "dead" {
		t.Errorf("redrive's confirmation:\n%s", page)
	}
	_, page = b.Post(one+"/redrive", url.Values{"confirm": {"yes"}, "token": {confirmationToken(t, page)}})
	if !strings.Contains(page, "Redriven: 1.") || s.status(t, test.MessageID) != "pending" {
		t.Errorf("redrive of the dead delivery:\n%s", page)
	}

	resp, page = b.Post(one+"/delete", url.Values{})
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<strong id="waiting-count">3</strong>`) {
		t.Fatalf("delete's confirmation: %d\n%s", resp.StatusCode, page)
	}
	if _, found := s.get(t, "acme", id[1]); !found {
		t.Fatal("asking to delete deleted")
	}
	_, page = b.Post(one+"/delete", url.Values{"confirm": {"yes"}, "token": {confirmationToken(t, page)}})
	if _, found := s.get(t, "acme", id[1]); found || !strings.Contains(page, "3 waiting row(s)") {
		t.Errorf("confirmed delete:\n%s", page)
	}
	if resp, _ := b.Get(one); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a deleted destination's page: %d, want 404", resp.StatusCode)
	}
}

// Signed in with a read token, the pages show destinations but offer no
// action, and the server refuses every action's form with 403, changing
// nothing.
// (Mutations, each failing this test: the routes registering the actions
// without c.allow; the destination page's actions shown whatever the
// role.)
func TestDestinationActionsNeedTheOperateRole(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer()}, withDestinations(sealingKey))
	d := s.create(t, "acme")
	b := s.browser(t)
	b.SignIn(viewerToken)
	one := "/tenants/acme/destinations/" + d.ID
	_, page := b.Get(one)
	if !strings.Contains(page, `id="read-only"`) || strings.Contains(page, `id="actions"`) || strings.Contains(page, "/rotate-secret") {
		t.Errorf("a read token is offered actions:\n%s", page)
	}
	if _, list := b.Get("/destinations"); strings.Contains(list, `id="create"`) || !strings.Contains(list, d.ID) {
		t.Errorf("a read token's list:\n%s", list)
	}
	for _, action := range []string{"edit", "disable", "enable", "rotate-secret", "delete", "test", "redrive"} {
		form := url.Values{"confirm": {"yes"}, "url": {"https://evil.example/"}, "reason": {"viewer"}}
		if resp, body := b.Post(one+"/"+action, form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "operate role") {
			t.Errorf("a read token's %s: %d, want 403 naming the role", action, resp.StatusCode)
		}
	}
	if resp, _ := b.Post("/destinations", url.Values{"tenant": {"acme"}, "url": {"https://evil.example/"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read token's create: %d, want 403", resp.StatusCode)
	}
	got, found := s.get(t, "acme", d.ID)
	if !found || got.URL != d.URL || !got.Enabled || *got.Waiting != 0 {
		t.Errorf("after the refused forms: %+v (found %v), want it unchanged", got, found)
	}
	if page, _ := s.listAll(t); len(page) != 1 {
		t.Errorf("after the refused forms %d destinations, want 1", len(page))
	}
}

// The list pages: a tenant's list goes on with More, carrying the
// tenant, until every destination has been shown once.
// (Mutations, each failing this test: the More link without the tenant;
// the store's page without its next cursor.)
func TestDestinationListIsPaged(t *testing.T) {
	s := newSite(t, console.Options{}, withDestinations(sealingKey))
	want := map[string]bool{}
	for range 52 {
		want[s.create(t, "acme").ID] = true
	}
	s.create(t, "globex")
	b := s.browser(t)
	seen := map[string]bool{}
	next, pages := "/destinations?tenant=acme", 0
	for next != "" {
		pages++
		_, page := b.Get(next)
		for _, m := range regexp.MustCompile(`<tr data-id="(dst_[a-z2-7]+)">`).FindAllStringSubmatch(page, -1) {
			if seen[m[1]] || !want[m[1]] {
				t.Fatalf("page %d shows %s again or from another tenant", pages, m[1])
			}
			seen[m[1]] = true
		}
		next = ""
		if m := regexp.MustCompile(`<a href="([^"]+)" rel="next"`).FindStringSubmatch(page); m != nil {
			next = html.UnescapeString(m[1])
			if !strings.Contains(next, "tenant=acme") {
				t.Fatalf("the next page %s forgets the tenant", next)
			}
		}
	}
	if pages != 2 || len(seen) != len(want) {
		t.Errorf("%d pages showed %d of acme's %d destinations, want 2 pages", pages, len(seen), len(want))
	}
}

// now is the time test events are stamped with.
func (s *site) now() time.Time { return time.Now() }

// fail records errs as the failed attempts of row id and kills it with
// the last.
func (s *site) fail(t *testing.T, id int64, errs ...string) {
	t.Helper()
	for i, e := range errs {
		if _, err := s.pool.Exec(s.ctx, "INSERT INTO "+s.ob.Schema()+".failed_attempts (message_id, attempt, error) VALUES ($1, $2, $3)", id, i+1, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(s.ctx, "UPDATE "+s.ob.Schema()+".messages SET status = 'dead', attempts = $2, last_error = $3 WHERE id = $1",
		id, len(errs), errs[len(errs)-1]); err != nil {
		t.Fatal(err)
	}
}

// status is row id's status.
func (s *site) status(t *testing.T, id int64) string {
	t.Helper()
	var status string
	if err := s.pool.QueryRow(s.ctx, "SELECT status FROM "+s.ob.Schema()+".messages WHERE id = $1", id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	return status
}

// listAll is the first page of every tenant's destinations.
func (s *site) listAll(t *testing.T) ([]destinations.Destination, string) {
	t.Helper()
	page, next, err := s.store(t).ListAll(s.ctx, s.pool, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return page, next
}
