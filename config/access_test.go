package config

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/access"
)

// http.tokens and http.trusted_proxy: each mistake is reported with its
// file, line and key, and no token value appears in any message.
// (Mutations, each failing this test: checkAccess not refusing a duplicate
// name, a repeated token value, a bad role, token with sha256, a bad
// digest, a proxy without sources or with a bad CIDR.)
func TestAccessProblemsNameKeyFileAndLine(t *testing.T) {
	t.Parallel()
	doc := `http:
  token: legacy-admin-secret
  tokens:
    - {name: admin, token: other-secret, role: read}
    - {name: viewer, token: legacy-admin-secret, role: read}
    - {name: ops, token: ops-secret, role: superuser}
    - {name: both, token: x-secret, sha256: abcd, role: read}
    - {name: hashed, sha256: not-hex, role: read}
    - {name: "bad name", token: y-secret, role: read}
  trusted_proxy:
    user_header: X-Forwarded-User
    default_role: boss
    sources: [10.0.0.0/33]
`
	_, err := Parse([]byte(doc), "team.yaml", EnvMap(nil))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`team.yaml:4:`, `http.tokens[0].name: "admin" is already the name of http.token`,
		`team.yaml:5:`, `http.tokens[1]: the same token as http.token`,
		`team.yaml:6:`, `http.tokens[2].role: want one of read, produce, operate or admin, got "superuser"`,
		`team.yaml:7:`, `http.tokens[3]: give token or sha256, not both`,
		`team.yaml:8:`, `http.tokens[4].sha256: want the token's SHA-256 as 64 hex digits`,
		`team.yaml:9:`, `http.tokens[5].name: "bad name"`,
		`team.yaml:12:`, `http.trusted_proxy.default_role: want one of`,
		`team.yaml:13:`, `http.trusted_proxy.sources[0]: "10.0.0.0/33"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problems lack %q:\n%s", want, msg)
		}
	}
	for _, secret := range []string{"legacy-admin-secret", "other-secret", "ops-secret", "x-secret"} {
		if strings.Contains(msg, secret) {
			t.Errorf("the problems show the token %q:\n%s", secret, msg)
		}
	}
	if _, err := Parse([]byte("http:\n  trusted_proxy: {user_header: X-User}\n"), "p.yaml", EnvMap(nil)); err == nil ||
		!strings.Contains(err.Error(), "give role_header, default_role or both") || !strings.Contains(err.Error(), "http.trusted_proxy.sources: missing") {
		t.Errorf("a proxy without role or sources: %v", err)
	}
}

// Named tokens (by value or by SHA-256), http.token as the admin token and
// the trusted proxy become the authenticator the API and the console use;
// config show prints no token.
// (Mutations, each failing this test: Authenticator dropping http.token,
// reading sha256 as a token value, ignoring the proxy's sources; the
// tokens' values not declared Secret.)
func TestAccessConfigAuthenticates(t *testing.T) {
	t.Parallel()
	digest := sha256.Sum256([]byte("viewer-secret"))
	doc := `http:
  listen: 0.0.0.0:8080
  token: legacy-admin-secret
  tokens:
    - {name: ops, token: ops-secret, role: operate}
    - {name: viewer, sha256: ` + hex.EncodeToString(digest[:]) + `, role: read}
  trusted_proxy: {user_header: X-Forwarded-User, role_header: X-Forwarded-Role, default_role: read, sources: [10.1.0.0/16, 192.0.2.7]}
`
	cfg, err := Parse([]byte(doc), "team.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.HTTP.Authenticates() {
		t.Error("Authenticates: false")
	}
	a := cfg.HTTP.Authenticator()
	for given, want := range map[string]access.Token{
		"legacy-admin-secret": {Name: "admin", Role: access.RoleAdmin},
		"ops-secret":          {Name: "ops", Role: access.RoleOperate},
		"viewer-secret":       {Name: "viewer", Role: access.RoleRead},
	} {
		got, ok := a.Match(given)
		if !ok || got.Name != want.Name || got.Role != want.Role {
			t.Errorf("token of %s: %+v %v, want %+v", want.Name, got, ok, want)
		}
	}
	if _, ok := a.Match(hex.EncodeToString(digest[:])); ok {
		t.Error("the digest itself was taken for the token")
	}
	for remote, want := range map[string]bool{"10.1.2.3:5000": true, "192.0.2.7:1": true, "192.0.2.8:1": false, "127.0.0.1:9": false} {
		r := httptest.NewRequest("GET", "/v1/stats", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-User", "alice")
		id, ok, err := a.FromProxy(r)
		if ok != want || err != nil || (ok && (id.Name != "alice" || id.Role != access.RoleRead)) {
			t.Errorf("proxy header from %s: %+v %v %v, want believed=%v", remote, id, ok, err, want)
		}
	}
	var out strings.Builder
	if err := cfg.WriteRedacted(&out); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"legacy-admin-secret", "ops-secret", hex.EncodeToString(digest[:])} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("config show prints %q:\n%s", secret, out.String())
		}
	}
	if !strings.Contains(out.String(), "ops") || !strings.Contains(out.String(), "operate") {
		t.Errorf("config show lacks the tokens' names and roles:\n%s", out.String())
	}
}
