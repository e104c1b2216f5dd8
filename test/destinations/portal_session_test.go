package destinations_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// portalSession is a tenant's browser in the portal: signed in through a
// link the API minted, with the session cookie it set.
type portalSession struct {
	t       *testing.T
	o       *outbox
	browser *http.Client
}

// openPortal mints a portal link of tenant through the API and opens it.
func (o *outbox) openPortal(t *testing.T, tenant string) *portalSession {
	t.Helper()
	var link struct {
		URL string `json:"url"`
	}
	o.call(t, http.MethodPost, "/v1/tenants/"+tenant+"/portal", map[string]any{"expires_in": "10m"}, &link)
	jar, _ := cookiejar.New(nil)
	p := &portalSession{t: t, o: o, browser: &http.Client{Jar: jar}}
	p.get(strings.TrimPrefix(link.URL, o.api))
	return p
}

// get returns the page at path (from the server's root).
func (p *portalSession) get(path string) string {
	p.t.Helper()
	resp, err := p.browser.Get(p.o.api + path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return string(b)
}

// post submits form to path and returns the answer's status and page.
func (p *portalSession) post(path string, form url.Values) (int, string) {
	p.t.Helper()
	resp, err := p.browser.PostForm(p.o.api+path, form)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// csrf is the CSRF token of the page at path.
func (p *portalSession) csrf(path string) string {
	p.t.Helper()
	page := p.get(path)
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		p.t.Fatalf("no CSRF token in the portal's page %s:\n%s", path, page)
	}
	return m[1]
}
