package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testcert"
)

// TestDestinationAuthenticationFlags: create sets headers, OAuth2 client
// credentials (the secret from its file) and a TLS client certificate
// from files; get's text shows what is set and no secret; update merges
// (a header added, one removed, an OAuth2 scope changed keeping the
// secret) and --no-oauth2, --no-tls-client-cert remove; a refused part
// exits non-zero naming the field.
//
// Mutation: patch() ignoring --remove-header fails the merge's check.
func TestDestinationAuthenticationFlags(t *testing.T) {
	c := newDestCLI(t)
	dir := t.TempDir()
	ca, err := testcert.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := ca.IssueValid(t, "acme-outboxd", false)
	files := map[string]string{"cert.pem": certPEM, "key.pem": keyPEM, "secret": "client-secret-9f2c55aa\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var d destinations.Created
	out := c.json(&d, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/in",
		"--header", "X-Api-Key=api-key-77a1c0de", "--header", "X-Team=payments",
		"--oauth2-token-url", "https://auth.acme.example/token", "--oauth2-client-id", "outboxd",
		"--oauth2-client-secret-file", filepath.Join(dir, "secret"), "--oauth2-scopes", "webhooks,events",
		"--tls-client-cert", filepath.Join(dir, "cert.pem"), "--tls-client-key", filepath.Join(dir, "key.pem"))
	if len(d.Headers) != 2 || d.OAuth2 == nil || d.OAuth2.ClientSecret != destinations.Set || len(d.OAuth2.Scopes) != 2 || d.TLSClientCert == nil {
		t.Fatalf("create: %s", out)
	}
	text, _, code := c.run(false, "", "destinations", "get", d.ID, "--tenant", "acme")
	if code != exitOK || !strings.Contains(text, "headers: X-Api-Key, X-Team (values set)") || !strings.Contains(text, "oauth2: client outboxd at https://auth.acme.example/token, secret set") ||
		!strings.Contains(text, "tls client certificate: CN=acme-outboxd") {
		t.Errorf("get: %d\n%s", code, text)
	}
	for _, shown := range []string{out, text} {
		for _, secret := range []string{"api-key-77a1c0de", "client-secret-9f2c55aa", strings.Split(keyPEM, "\n")[1]} {
			if strings.Contains(shown, secret) {
				t.Fatalf("a secret is shown: %s", shown)
			}
		}
	}

	var u destinations.Destination
	c.json(&u, "destinations", "update", d.ID, "--tenant", "acme", "--header", "X-Env=prod", "--remove-header", "X-Team", "--oauth2-scopes", "webhooks")
	if len(u.Headers) != 2 || u.Headers["X-Env"] != destinations.Set || u.Headers["X-Team"] != "" || len(u.OAuth2.Scopes) != 1 || u.TLSClientCert == nil {
		t.Errorf("update merged into %+v", u.AuthSummary)
	}
	c.json(&u, "destinations", "update", d.ID, "--tenant", "acme", "--no-oauth2", "--no-tls-client-cert")
	if u.OAuth2 != nil || u.TLSClientCert != nil || len(u.Headers) != 2 {
		t.Errorf("--no-oauth2 --no-tls-client-cert left %+v", u.AuthSummary)
	}
	_, stderr, code := c.run(false, "", "destinations", "update", d.ID, "--tenant", "acme", "--header", "webhook-id=forged")
	if code == exitOK || !strings.Contains(stderr, "headers.webhook-id") {
		t.Errorf("a reserved header: exit %d, %s", code, stderr)
	}
}
