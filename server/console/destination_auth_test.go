package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testcert"
	"github.com/outboxd/outboxd/server/console"
)

// TestDestinationAuthenticationFormSetsAndNeverShowsSecrets: the
// authentication form of a destination's page (the portal's is this one)
// sets headers, OAuth2 client credentials and a TLS client certificate;
// the page then says what is set (header names, the client, the
// certificate's subject) and shows no secret, nor does the form; a
// refused part answers 422 naming it and changes nothing; an empty
// secret keeps the stored one; the removal boxes remove. The same in the
// tenant's portal.
//
// Mutation: readAuthForm not reading the certificate's fields fails it
// (the page never shows the certificate).
func TestDestinationAuthenticationFormSetsAndNeverShowsSecrets(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer()}, withDestinations(sealingKey))
	b := s.browser(t)
	b.SignIn(token)
	b.Get("/")
	resp, page := b.Post("/destinations", url.Values{"tenant": {"acme"}, "url": {"https://hooks.acme.example/in"}})
	id := regexp.MustCompile(`href="/tenants/acme/destinations/(dst_[a-z2-7]+)"`).FindStringSubmatch(page)
	if resp.StatusCode != http.StatusCreated || id == nil {
		t.Fatalf("create: %d\n%s", resp.StatusCode, page)
	}
	one := "/tenants/acme/destinations/" + id[1]
	if _, page := b.Get(one); !strings.Contains(page, `id="auth">the signature only`) {
		t.Errorf("a destination without authentication does not say so:\n%s", page)
	}
	ca, err := testcert.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := ca.IssueValid(t, "acme-outboxd", false)
	secrets := []string{"api-key-77a1c0de", "client-secret-9f2c55aa", strings.Split(keyPEM, "\n")[1]}
	resp, page = b.Post(one+"/auth", url.Values{"headers": {"X-Api-Key: api-key-77a1c0de\nX-Team: payments"},
		"oauth2_token_url": {"https://auth.acme.example/token"}, "oauth2_client_id": {"outboxd-acme"},
		"oauth2_client_secret": {"client-secret-9f2c55aa"}, "oauth2_scopes": {"webhooks events"},
		"tls_client_cert": {certPEM}, "tls_client_key": {keyPEM}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("setting the authentication: %d\n%s", resp.StatusCode, page)
	}
	_, page = b.Get(one)
	for _, want := range []string{`<span class="key">X-Api-Key</span>`, `OAuth2 client <span class="key">outboxd-acme</span>`, `CN=acme-outboxd`, `value="outboxd-acme"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not show %s:\n%s", want, page)
		}
	}
	for _, secret := range secrets {
		if strings.Contains(page, secret) {
			t.Fatalf("the page shows a secret (%s)", secret)
		}
	}

	// A refused part changes nothing; an empty secret keeps the stored
	// one (the token URL as shown too).
	resp, page = b.Post(one+"/auth", url.Values{"headers": {"webhook-id: forged"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "headers.webhook-id") {
		t.Errorf("a reserved header: %d\n%s", resp.StatusCode, page)
	}
	b.Post(one+"/auth", url.Values{"oauth2_token_url": {"https://auth.acme.example/token"}, "oauth2_client_id": {"outboxd-acme"},
		"oauth2_scopes": {"webhooks"}, "remove_headers": {"X-Team"}, "tls_client_cert_remove": {"1"}})
	d, _ := s.get(t, "acme", id[1])
	if len(d.Headers) != 1 || d.OAuth2 == nil || d.OAuth2.ClientSecret != destinations.Set || len(d.OAuth2.Scopes) != 1 || d.TLSClientCert != nil {
		t.Errorf("after the second form: %+v", d.AuthSummary)
	}
	b.Post(one+"/auth", url.Values{"oauth2_remove": {"1"}, "remove_headers": {"X-Api-Key"}})
	if _, page := b.Get(one); !strings.Contains(page, `id="auth">the signature only`) {
		t.Errorf("everything removed, the page does not say so:\n%s", page)
	}

	// The tenant's portal: its form sets a header, its page names it
	// without its value, a reserved one is a 422 naming it.
	p := s.openPortal(t, "acme")
	mine := "/portal/destinations/" + id[1]
	p.Post(mine+"/auth", url.Values{"headers": {"X-Api-Key: api-key-77a1c0de"}})
	if _, page := p.Get(mine); !strings.Contains(page, `<span class="key">X-Api-Key</span>`) || strings.Contains(page, "api-key-77a1c0de") {
		t.Errorf("the portal's page does not name the header set in the portal, or shows its value:\n%s", page)
	}
	if resp, page := p.Post(mine+"/auth", url.Values{"headers": {"Host: evil.example"}}); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(page, "headers.Host") {
		t.Errorf("a reserved header in the portal: %d\n%s", resp.StatusCode, page)
	}
}
