package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/consoletest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
)

// formToken finds the count's token in a confirmation page.
var formToken = regexp.MustCompile(`name="token" value="([^"]+)"`)

// confirmationToken is the token a confirmation page's form carries.
func confirmationToken(t *testing.T, page string) string {
	t.Helper()
	m := formToken.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the confirmation carries no token:\n%s", page)
	}
	return m[1]
}

// destinationPlace is where a destination's pages are: the console,
// signed in as an admin, or a tenant's portal.
type destinationPlace struct {
	name   string
	tenant string
	open   func(t *testing.T) *consoletest.Browser
	// base is the path of the tenant's destination pages, with a slash.
	base string
}

// destinationPlaces are the console (for acme) and globex's portal.
func destinationPlaces(s *site) []destinationPlace {
	return []destinationPlace{
		{"console", "acme", func(t *testing.T) *consoletest.Browser { b := s.browser(t); b.SignIn(token); return b }, "/tenants/acme/destinations/"},
		{"portal", "globex", func(t *testing.T) *consoletest.Browser { return s.openPortal(t, "globex") }, "/portal/destinations/"},
	}
}

// In the console and in the portal alike, a destination's delete counts
// first: the confirmation page shows the waiting rows counted and its
// form carries the count's token; confirmed after a row arrived, nothing
// is deleted and the page (409) says the rows changed and asks again
// with the new count; confirmed with that count's token, it deletes the
// destination and exactly those rows. A confirmation without a token
// only counts, and a token no count made is refused; neither deletes.
// (Mutations, each failing this test: deleteDestination counting afresh
// at the confirmation and deleting with that count's token instead of
// the form's; confirm=yes without a token deleting with a fresh count;
// the count changed answered 200 instead of 409; the template without
// the hidden token field.)
func TestDestinationDeleteConfirmsWhatItCounted(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer()}, withDestinations(sealingKey))
	st := s.store(t)
	for _, place := range destinationPlaces(s) {
		t.Run(place.name, func(t *testing.T) {
			d := s.create(t, place.tenant)
			send := func() {
				t.Helper()
				if _, err := st.SendTestEvent(s.ctx, s.pool, testdb.Actor, place.tenant, d.ID, "customers", s.now()); err != nil {
					t.Fatal(err)
				}
			}
			send()
			b := place.open(t)
			one := place.base + d.ID
			b.Get(one) // the destination's page, whose Delete… button asks

			resp, page := b.Post(one+"/delete", url.Values{})
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<strong id="waiting-count">1</strong>`) {
				t.Fatalf("delete's confirmation: %d\n%s", resp.StatusCode, page)
			}
			counted := confirmationToken(t, page)

			// Without a token, or with one no count made: nothing goes.
			if resp, page := b.Post(one+"/delete", url.Values{"confirm": {"yes"}}); resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="confirm-delete"`) {
				t.Errorf("a confirmation without a token: %d, want the count asked again\n%s", resp.StatusCode, page)
			}
			if resp, _ := b.Post(one+"/delete", url.Values{"confirm": {"yes"}, "token": {"1.nonsense"}}); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("a confirmation with a token no count made: %d, want 400", resp.StatusCode)
			}
			if _, found := s.get(t, place.tenant, d.ID); !found {
				t.Fatal("a confirmation without the count's token deleted")
			}

			// A row arrives while the page is on the screen.
			send()
			resp, page = b.Post(one+"/delete", url.Values{"confirm": {"yes"}, "token": {counted}})
			if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "The rows changed since you confirmed; confirm again.") ||
				!strings.Contains(page, `<strong id="waiting-count">2</strong>`) {
				t.Fatalf("a confirmation after a row arrived: %d, want 409 with the new count\n%s", resp.StatusCode, page)
			}
			if _, found := s.get(t, place.tenant, d.ID); !found || len(s.rowsOf(t, d.ID)) != 2 {
				t.Fatal("a confirmation of an outdated count deleted")
			}
			recounted := confirmationToken(t, page)
			if recounted == counted {
				t.Fatal("the new count carries the old token")
			}

			resp, page = b.Post(one+"/delete", url.Values{"confirm": {"yes"}, "token": {recounted}})
			if _, found := s.get(t, place.tenant, d.ID); found || resp.StatusCode != http.StatusOK || !strings.Contains(page, "2 waiting row(s)") {
				t.Errorf("the confirmed delete: %d (still there: %v)\n%s", resp.StatusCode, found, page)
			}
			if n := len(s.rowsOf(t, d.ID)); n != 0 {
				t.Errorf("%d rows of the deleted destination are left", n)
			}
		})
	}
}

// A destination's redrive counts first too, in the console and in the
// portal: the confirmation page shows the dead deliveries counted and
// redrives nothing; confirmed after a counted one was redriven
// elsewhere, nothing moves and the page (409) asks again with the new
// count; confirmed with that count's token, exactly the rows counted are
// redriven (one that died after the count stays dead).
// (Mutations, each failing this test: redriveDestination acting without
// a dry run whatever the form says; the count changed answered 200
// instead of 409; the confirmation redriving without the form's token.)
func TestDestinationRedriveConfirmsWhatItCounted(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer()}, withDestinations(sealingKey))
	st := s.store(t)
	for _, place := range destinationPlaces(s) {
		t.Run(place.name, func(t *testing.T) {
			d := s.create(t, place.tenant)
			dead := func(why string) int64 {
				t.Helper()
				sent, err := st.SendTestEvent(s.ctx, s.pool, testdb.Actor, place.tenant, d.ID, "customers", s.now())
				if err != nil {
					t.Fatal(err)
				}
				s.fail(t, sent.MessageID, why)
				return sent.MessageID
			}
			first, second := dead("HTTP 503"), dead("HTTP 500")
			b := place.open(t)
			one := place.base + d.ID
			b.Get(one)

			resp, page := b.Post(one+"/redrive", url.Values{})
			if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<strong id="redrive-count">2</strong>`) || s.status(t, first) != "dead" {
				t.Fatalf("redrive's confirmation: %d (first row %s)\n%s", resp.StatusCode, s.status(t, first), page)
			}
			counted := confirmationToken(t, page)

			// The first is redriven elsewhere meanwhile.
			if _, err := s.pool.Exec(s.ctx, "UPDATE "+s.ob.Schema()+".messages SET status = 'pending', attempts = 0 WHERE id = $1", first); err != nil {
				t.Fatal(err)
			}
			resp, page = b.Post(one+"/redrive", url.Values{"confirm": {"yes"}, "token": {counted}})
			if resp.StatusCode != http.StatusConflict || !strings.Contains(page, `id="changed"`) || !strings.Contains(page, `<strong id="redrive-count">1</strong>`) ||
				s.status(t, second) != "dead" {
				t.Fatalf("a confirmation after a counted row moved: %d, want 409 with the new count (second row %s)\n%s", resp.StatusCode, s.status(t, second), page)
			}
			recounted := confirmationToken(t, page)

			// One dies after the count: the confirmation leaves it.
			third := dead("HTTP 502")
			_, page = b.Post(one+"/redrive", url.Values{"confirm": {"yes"}, "token": {recounted}})
			if !strings.Contains(page, "Redriven: 1.") || s.status(t, second) != "pending" || s.status(t, third) != "dead" {
				t.Errorf("the confirmed redrive: second %s, third %s\n%s", s.status(t, second), s.status(t, third), page)
			}
		})
	}
}
