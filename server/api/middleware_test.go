package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHostGuard: which Host headers each kind of listen accepts. With a
// loopback listen only loopback names and addresses and the allowed names;
// with another listen anything, unless names are allowed: then those,
// loopback, and IP addresses (which no page can rebind).
func TestHostGuard(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	cases := []struct {
		listen  string
		allowed []string
		host    string
		pass    bool
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1:8080", true},
		{"127.0.0.1:8080", nil, "localhost", true},
		{"127.0.0.1:8080", nil, "LOCALHOST.:9", true},
		{"127.0.0.1:8080", nil, "127.9.9.9", true},
		{"[::1]:8080", nil, "[::1]:8080", true},
		{"127.0.0.1:8080", nil, "evil.example:8080", false},
		{"127.0.0.1:8080", nil, "localhost.evil.example", false},
		{"127.0.0.1:8080", nil, "10.0.0.1:8080", false},
		{"127.0.0.1:8080", nil, "", false},
		{"127.0.0.1:8080", []string{"outbox.internal:8080"}, "Outbox.Internal", true},
		{"localhost:8080", []string{"outbox.internal"}, "other.internal", false},
		{"0.0.0.0:8080", nil, "anything.example", true},
		{"0.0.0.0:8080", []string{"outbox.example.com"}, "outbox.example.com:443", true},
		{"0.0.0.0:8080", []string{"outbox.example.com"}, "10.1.2.3:8080", true},
		{"0.0.0.0:8080", []string{"outbox.example.com"}, "[fd00::1]:8080", true},
		{"0.0.0.0:8080", []string{"outbox.example.com"}, "evil.example", false},
	}
	for _, c := range cases {
		req := httptest.NewRequest(http.MethodGet, "/v1/stats", nil)
		req.Host = c.host
		rec := httptest.NewRecorder()
		hostGuard(c.listen, c.allowed, ok).ServeHTTP(rec, req)
		if pass := rec.Code == http.StatusNoContent; pass != c.pass || (!pass && rec.Code != http.StatusMisdirectedRequest) {
			t.Errorf("listen %s, allowed %v, Host %q: %d, want pass=%v (421 otherwise)", c.listen, c.allowed, c.host, rec.Code, c.pass)
		}
	}
}

// TestRequireJSONOnAbsentBodies: a request with no body and no
// Content-Type passes, whether its length is declared 0 or it is chunked
// and empty, and the endpoint then sees no body of either kind; a body
// without a declared type, chunked or not, or a wrong type is refused
// with 415, and a passing chunked body reaches the endpoint whole.
// (Mutation: bodyless answering true without reading a chunked body
// fails this test: the chunked "{}" without a type passes.)
func TestRequireJSONOnAbsentBodies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body, contentType string
		chunked                 bool
		status                  int
	}{
		{"no body", "", "", false, http.StatusNoContent},
		{"chunked, empty", "", "", true, http.StatusNoContent},
		{"a body, no type", "{}", "", false, http.StatusUnsupportedMediaType},
		{"chunked, no type", "{}", "", true, http.StatusUnsupportedMediaType},
		{"no body, a wrong type", "", "text/plain", false, http.StatusUnsupportedMediaType},
		{"chunked JSON", `{"n":1}`, "application/json", true, http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/tenants/acme/portal", strings.NewReader(c.body))
		if c.chunked {
			req.ContentLength = -1
		}
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		rec := httptest.NewRecorder()
		requireJSON(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, err := io.ReadAll(r.Body)
			switch {
			case err != nil || string(got) != c.body:
				t.Errorf("%s: the endpoint read %q (%v), want %q", c.name, got, err, c.body)
			case len(got) == 0 && (r.ContentLength != 0 || r.Body != http.NoBody):
				t.Errorf("%s: an absent body reaches the endpoint as %T of length %d, want http.NoBody", c.name, r.Body, r.ContentLength)
			case len(got) == 0:
				w.WriteHeader(http.StatusNoContent)
			}
		})).ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s: %d, want %d", c.name, rec.Code, c.status)
		}
	}
}
