package console_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/consoletest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
	"github.com/outboxd/outboxd/server/portal"
)

// otherKey is a key with the id of sealingKey and other bytes; newKey a
// key of another id.
const (
	otherKey = "k1:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
	newKey   = "k2:YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODk="
)

// links signs portal links with keys (destinations.EnvSecretsKey's form).
func links(t *testing.T, keys string) *portal.Links {
	t.Helper()
	ring, err := destinations.ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	p, err := portal.NewLinks(ring)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// link is the path and query of tenant's portal link until expires.
func link(t *testing.T, p *portal.Links, tenant string, expires time.Time) string {
	t.Helper()
	u, _, err := p.Link("http://outboxd.example", tenant, "", expires)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u, "http://outboxd.example")
}

// openPortal opens tenant's link in a new browser and returns it.
func (s *site) openPortal(t *testing.T, tenant string) *consoletest.Browser {
	t.Helper()
	b := s.browser(t)
	resp, body := b.Get(link(t, links(t, sealingKey), tenant, time.Now().Add(time.Hour)))
	if resp.StatusCode != http.StatusOK || b.Cookies[portal.Cookie] == nil {
		t.Fatalf("open %s's portal: %d\n%s", tenant, resp.StatusCode, body)
	}
	return b
}

// A portal link opens its tenant's portal until it expires, with a
// session cookie scoped to the portal (HttpOnly, SameSite=Strict, the
// link's expiry); a link whose tenant, expiry, key or signature was
// changed, one signed with another key, and an expired one are refused
// with a page saying so and no cookie. Links signed under a key stay
// valid while the keyring still lists it and are refused once it is
// dropped.
// (Mutations, each failing this test: Open skipping the HMAC check; the
// MAC not covering the expiry; Open skipping the expiry check; the cookie
// without HttpOnly, with SameSite=Lax or with Path=/; portal.NewLinks
// deriving from only the current key.)
func TestPortalLinksRefuseTamperedExpiredAndForeignLinks(t *testing.T) {
	t.Parallel()
	t.Run("links", func(t *testing.T) {
		s := newSite(t, console.Options{Access: adminToken()}, withDestinations(sealingKey))
		p := links(t, sealingKey)
		expires := time.Now().Add(time.Hour)
		valid := link(t, p, "acme", expires)
		b := s.browser(t)
		resp, body := b.Get(valid)
		c := b.Cookies[portal.Cookie]
		if resp.StatusCode != http.StatusOK || c == nil || !strings.Contains(body, `http-equiv="refresh" content="0; url=/portal/"`) {
			t.Fatalf("a valid link: %d, cookie %v\n%s", resp.StatusCode, c, body)
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != portal.Path || c.Secure ||
			c.MaxAge < 3590 || c.MaxAge > 3600 || strings.Contains(c.Value, "acme") {
			t.Errorf("portal cookie %+v: want HttpOnly, SameSite=Strict, Path=%s, the link's expiry, not Secure over HTTP, the tenant not in clear", c, portal.Path)
		}

		q, _ := url.ParseQuery(strings.SplitN(valid, "?", 2)[1])
		tampered := func(name, value string) string {
			t := url.Values{}
			for k, v := range q {
				t[k] = v
			}
			t.Set(name, value)
			return portal.OpenPath + "?" + t.Encode()
		}
		for name, tc := range map[string]struct{ path, says string }{
			"another tenant":      {tampered("tenant", "globex"), "not valid"},
			"a later expiry":      {tampered("expires", strconv.FormatInt(expires.Unix()+3600, 10)), "not valid"},
			"another key id":      {tampered("key", "k9"), "not valid"},
			"another signature":   {tampered("sig", base64.RawURLEncoding.EncodeToString(make([]byte, 32))), "not valid"},
			"no signature":        {tampered("sig", ""), "not valid"},
			"signed with another": {link(t, links(t, otherKey), "acme", expires), "not valid"},
			"expired":             {link(t, p, "acme", time.Now().Add(-time.Second)), "expired"},
		} {
			b := s.browser(t)
			resp, body := b.Get(tc.path)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, tc.says) || b.Cookies[portal.Cookie] != nil {
				t.Errorf("%s: %d, cookie %v, want 403 saying %q and no session", name, resp.StatusCode, b.Cookies[portal.Cookie], tc.says)
			}
		}
	})
	t.Run("the keyring rotated", func(t *testing.T) {
		s := newSite(t, console.Options{}, withDestinations(newKey+","+sealingKey))
		old := link(t, links(t, sealingKey), "acme", time.Now().Add(time.Hour))
		if resp, _ := s.browser(t).Get(old); resp.StatusCode != http.StatusOK {
			t.Errorf("a link of the old key while the keyring still lists it: %d, want 200", resp.StatusCode)
		}
	})
	t.Run("the old key dropped", func(t *testing.T) {
		s := newSite(t, console.Options{}, withDestinations(newKey))
		old := link(t, links(t, sealingKey), "acme", time.Now().Add(time.Hour))
		if resp, _ := s.browser(t).Get(old); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a link of a key dropped from the keyring: %d, want 403", resp.StatusCode)
		}
	})
}

// The portal session: forged, stretched, expired and missing sessions are
// refused with a page saying so; each form needs the session's CSRF
// token and none from another site passes; the console's sign-in does not
// open the portal, nor the portal's session the console; ending the
// session removes the cookie.
// (Mutations, each failing this test: Identify skipping the MAC or the
// expiry check; requirePortalSession without CheckCSRF; the portal
// routes behind the console's sign-in; the portal served without a
// session.)
func TestPortalSessionsAreSignedScopedAndCSRFProtected(t *testing.T) {
	s := newSite(t, console.Options{Access: adminToken()}, withDestinations(sealingKey))
	b := s.openPortal(t, "acme")
	if resp, body := b.Get("/portal/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="who">acme<`) {
		t.Fatalf("the portal with a session: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := b.Get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the console with only a portal session: %d, want a redirect to sign in", resp.StatusCode)
	}

	value := b.Cookies[portal.Cookie].Value
	parts := strings.Split(value, ".")
	if len(parts) != 4 {
		t.Fatalf("session %q: want key.tenant.expiry.mac", value)
	}
	p := links(t, sealingKey)
	for name, forged := range map[string]string{
		"another tenant": parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("globex")) + "." + parts[2] + "." + parts[3],
		"a later expiry": parts[0] + "." + parts[1] + ".9999999999." + parts[3],
		"garbage":        "garbage",
		"expired":        p.SessionValue("acme", "", time.Now().Add(-time.Second)),
		"another key":    links(t, otherKey).SessionValue("acme", "", time.Now().Add(time.Hour)),
	} {
		other := s.browser(t)
		other.Cookies[portal.Cookie] = &http.Cookie{Name: portal.Cookie, Value: forged}
		if resp, body := other.Get("/portal/"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "new link") {
			t.Errorf("session %s: %d, want 401 asking for a new link", name, resp.StatusCode)
		}
	}
	genuine := s.browser(t)
	genuine.Cookies[portal.Cookie] = &http.Cookie{Name: portal.Cookie, Value: p.SessionValue("acme", "", time.Now().Add(time.Minute))}
	if resp, _ := genuine.Get("/portal/"); resp.StatusCode != http.StatusOK {
		t.Errorf("a genuine session: %d, want 200", resp.StatusCode)
	}
	signedIn := s.browser(t)
	signedIn.SignIn(token)
	if resp, _ := signedIn.Get("/portal/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the portal with the console's session: %d, want 401", resp.StatusCode)
	}

	b.Get("/portal/")
	create := url.Values{"url": {"https://hooks.acme.example/"}}
	for name, c := range map[string]struct {
		csrf   string
		header []string
	}{
		"no token":              {"", nil},
		"the console's token":   {signedIn.CSRF, nil},
		"token, another site":   {b.CSRF, []string{"Sec-Fetch-Site", "cross-site"}},
		"token, foreign origin": {b.CSRF, []string{"Origin", "https://evil.example"}},
	} {
		form := url.Values{"csrf": {c.csrf}}
		for k, v := range create {
			form[k] = v
		}
		if resp, _ := b.Post("/portal/destinations", form, c.header...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a create with %s: %d, want 403", name, resp.StatusCode)
		}
	}
	if page, _ := s.listAll(t); len(page) != 0 {
		t.Fatalf("a refused form created %d destinations", len(page))
	}
	if resp, _ := b.Post("/portal/destinations", create); resp.StatusCode != http.StatusCreated {
		t.Errorf("a create with the session's token: %d, want 201", resp.StatusCode)
	}

	b.Get("/portal/")
	if resp, body := b.Post("/portal/signout", url.Values{}); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="ended"`) || b.Cookies[portal.Cookie] != nil {
		t.Errorf("end session: %d, cookie %v", resp.StatusCode, b.Cookies[portal.Cookie])
	}
	if resp, _ := b.Get("/portal/"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after ending the session: %d, want 401", resp.StatusCode)
	}
}

// In acme's portal only acme's destinations and deliveries show and
// change: globex's destination is 404 on its page and to every action,
// and stays as it was; a tenant in the query or a form changes nothing;
// a redrive names only acme's own dead rows; the deliveries do not link
// to the console's message pages.
// (Mutations, each failing this test: portalScope taking the tenant from
// ?tenant= or the form; the portal's list using ListAll;
// destination_get.sql's tenant condition made always true (the delete
// confirmation shows globex's); redriveDestination redriving the form's
// message without DeadRows.)
func TestPortalShowsAndChangesOnlyItsTenantsDestinations(t *testing.T) {
	s := newSite(t, console.Options{Access: adminToken()}, withDestinations(sealingKey))
	st := s.store(t)
	mine, theirs := s.create(t, "acme"), s.create(t, "globex")
	test, err := st.SendTestEvent(s.ctx, s.pool, testdb.Actor, "globex", theirs.ID, "customers", s.now())
	if err != nil {
		t.Fatal(err)
	}
	s.fail(t, test.MessageID, "HTTP 500: globex's receiver")
	own, err := st.SendTestEvent(s.ctx, s.pool, testdb.Actor, "acme", mine.ID, "customers", s.now())
	if err != nil {
		t.Fatal(err)
	}
	s.fail(t, own.MessageID, "HTTP 503: acme's receiver")

	b := s.openPortal(t, "acme")
	for _, path := range []string{"/portal/", "/portal/?tenant=globex"} {
		_, page := b.Get(path)
		if !strings.Contains(page, mine.ID) || strings.Contains(page, theirs.ID) || strings.Contains(page, "globex") {
			t.Errorf("GET %s in acme's portal shows globex's or lacks acme's:\n%s", path, page)
		}
	}
	_, page := b.Get("/portal/destinations/" + mine.ID + "?tenant=globex")
	if !strings.Contains(page, "acme&#39;s receiver") || strings.Contains(page, "globex") || strings.Contains(page, `href="/messages/`) {
		t.Errorf("acme's destination in its portal:\n%s", page)
	}

	foreign := "/portal/destinations/" + theirs.ID
	if resp, body := b.Get(foreign); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "globex") {
		t.Errorf("GET globex's destination in acme's portal: %d, want 404 naming no tenant", resp.StatusCode)
	}
	for _, action := range []string{"edit", "disable", "enable", "rotate-secret", "delete", "test", "redrive"} {
		form := url.Values{"confirm": {"yes"}, "url": {"https://evil.example/"}, "reason": {"acme"}, "tenant": {"globex"}}
		if resp, _ := b.Post(foreign+"/"+action, form); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s of globex's destination in acme's portal: %d, want 404", action, resp.StatusCode)
		}
	}
	if resp, body := b.Post(foreign+"/delete", url.Values{}); resp.StatusCode != http.StatusNotFound || strings.Contains(body, theirs.URL) {
		t.Errorf("asking to delete globex's destination in acme's portal: %d, want 404 without its URL", resp.StatusCode)
	}
	got, found := s.get(t, "globex", theirs.ID)
	if !found || got.URL != theirs.URL || !got.Enabled || s.status(t, test.MessageID) != "dead" || len(s.rowsOf(t, theirs.ID)) != 1 {
		t.Errorf("globex's destination after acme's portal tried it: %+v (found %v)", got, found)
	}

	// Redriving acme's destination with globex's dead row named: none of
	// globex's moves.
	_, page = b.Post("/portal/destinations/"+mine.ID+"/redrive", url.Values{"message": {strconv.FormatInt(test.MessageID, 10)}})
	if !strings.Contains(page, "Nothing to redrive") || s.status(t, test.MessageID) != "dead" {
		t.Errorf("a redrive naming globex's row:\n%s", page)
	}
	_, page = b.Post("/portal/destinations/"+mine.ID+"/redrive", url.Values{})
	_, page = b.Post("/portal/destinations/"+mine.ID+"/redrive", url.Values{"confirm": {"yes"}, "token": {confirmationToken(t, page)}})
	if !strings.Contains(page, "Redriven: 1.") || s.status(t, own.MessageID) != "pending" {
		t.Errorf("a redrive of acme's dead rows:\n%s", page)
	}

	// A create with globex in the form creates acme's.
	if resp, _ := b.Post("/portal/destinations", url.Values{"url": {"https://hooks.acme.example/2"}, "tenant": {"globex"}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create in the portal: %d", resp.StatusCode)
	}
	for tenant, want := range map[string]int{"acme": 2, "globex": 1} {
		if page, _, err := st.List(s.ctx, s.pool, tenant, "", 0); err != nil || len(page) != want {
			t.Errorf("%s has %d destinations (%v), want %d", tenant, len(page), err, want)
		}
	}
}

// rowsOf are the ids of destination id's rows.
func (s *site) rowsOf(t *testing.T, id string) []int64 {
	t.Helper()
	rows, err := s.pool.Query(s.ctx, "SELECT id FROM "+s.ob.Schema()+".messages WHERE headers->>'outboxd-destination' = $1", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n)
	}
	return ids
}
