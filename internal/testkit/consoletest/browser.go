// Package consoletest is a browser just good enough for tests of the
// operator console: it keeps cookies and the last page's CSRF token, and
// does not follow redirects (tests look at them).
package consoletest

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Browser talks to one console.
type Browser struct {
	t    testing.TB
	base string
	// Cookies are the cookies it holds, by name.
	Cookies map[string]*http.Cookie
	// CSRF is the CSRF token of the last page that had a form.
	CSRF string
}

// New returns a browser for the console at base (scheme and host).
func New(t testing.TB, base string) *Browser {
	return &Browser{t: t, base: base, Cookies: map[string]*http.Cookie{}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]*)"`)

// Do sends req with the cookies and returns the response and its body.
func (b *Browser) Do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	for _, c := range b.Cookies {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 {
			delete(b.Cookies, c.Name)
		} else {
			b.Cookies[c.Name] = c
		}
	}
	if m := csrfField.FindSubmatch(raw); m != nil {
		b.CSRF = string(m[1])
	}
	return resp, string(raw)
}

// Get loads path.
func (b *Browser) Get(path string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest("GET", b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.Do(req)
}

// Post submits form to path, with the last page's CSRF token unless the
// form sets one, and header (name, value, ...).
func (b *Browser) Post(path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	if _, set := form["csrf"]; !set {
		form.Set("csrf", b.CSRF)
	}
	req, err := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.Do(req)
}

// SignIn signs in with token and fails the test unless that works.
func (b *Browser) SignIn(token string) {
	b.t.Helper()
	b.Get("/signin")
	if resp, body := b.Post("/signin", url.Values{"token": {token}, "next": {"/"}}); resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign in: %d %s", resp.StatusCode, body)
	}
}
