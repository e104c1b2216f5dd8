package api

import (
	"net/http"
	"net/http/httptest"
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
