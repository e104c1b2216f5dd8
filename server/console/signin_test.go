package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/server/console"
)

// crafted are sign-in targets (the next parameter, as the browser decodes
// it from the query or the form) and where the console may send the
// browser after signing in: only a path of this origin, else "/".
// Browsers drop tabs and newlines from a URL and read a backslash as a
// slash, so "/\t/evil.example/" is "//evil.example/", another origin.
var crafted = []struct{ next, location string }{
	{"//evil.example/", "/"},
	{`/\evil.example/`, "/"},
	{"/\t/evil.example/", "/"},
	{"/\n/evil.example/", "/"},
	{"/\r\n/evil.example/", "/"},
	{"/ /evil.example/", "/"},
	{"/\u00a0/evil.example/", "/"},
	{"/%2F/evil.example/", "/"},
	{"/%5C/evil.example/", "/"},
	{"/%09/evil.example/", "/"},
	{`/ok\..\/evil.example/`, "/"},
	{"https://evil.example/", "/"},
	{"HTTPS:evil.example", "/"},
	{"javascript:alert(1)", "/"},
	{`\evil.example`, "/"},
	{`\\evil.example`, "/"},
	{"evil.example", "/"},
	{"", "/"},
	{"/ok/path?x=1", "/ok/path?x=1"},
	{"/messages?sink=partner&key=a%2Fb", "/messages?sink=partner&key=a%2Fb"},
	{"/dead-letters", "/dead-letters"},
}

// After signing in, and when already signed in, the console redirects
// only to a path of its own origin: /signin?next=/%09/host/path used to
// answer Location: /\t/host/path, which browsers follow to host.
// (Mutation: localPath checking only the "//" and "/\" prefixes, as
// before issue 43, fails this test for the tab, newline, space and
// %2F-encoded targets.)
func TestSignInRedirectsOnlyWithinTheConsole(t *testing.T) {
	s := newSite(t, console.Options{Access: adminToken()})
	signedIn := s.browser(t)
	signedIn.SignIn(token)
	signInPage := s.browser(t)
	signInPage.Get("/signin")
	for _, c := range crafted {
		form := url.Values{"token": {token}, "next": {c.next}, console.CSRFField: {signInPage.CSRF}}
		req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/signin", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if status, got := redirect(t, req); status != http.StatusSeeOther || got != c.location {
			t.Errorf("signing in with next %q: %d to %q, want 303 to %q", c.next, status, got, c.location)
		}
		req, err = http.NewRequest(http.MethodGet, s.srv.URL+"/signin?next="+url.QueryEscape(c.next), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(signedIn.Cookies[console.SessionCookie])
		if status, got := redirect(t, req); status != http.StatusSeeOther || got != c.location {
			t.Errorf("signed in, GET /signin?next=%q: %d to %q, want 303 to %q", c.next, status, got, c.location)
		}
	}
	// The issue's own request, its query as typed.
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/signin?next=/%09/host/path", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(signedIn.Cookies[console.SessionCookie])
	if _, got := redirect(t, req); got != "/" {
		t.Errorf("GET /signin?next=/%%09/host/path: Location %q, want /", got)
	}
}

// redirect sends req as it is, without following a redirect or parsing
// its Location (an http.Client refuses a Location with a control
// character, which a browser follows), and returns the status and the
// Location header.
func redirect(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}
