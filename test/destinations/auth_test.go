package destinations_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testcert"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/internal/testkit/tokenserver"
)

// TestEndpointAuthenticationEndToEnd (issue 45 item 2) runs the real
// binary: a destination created through the API with a header and OAuth2
// client credentials receives each event with the header and a bearer
// token from the tenant's token endpoint, fetched once for several
// deliveries and fetched again when the receiver refuses it (401), the
// delivery then succeeding at its first attempt; a destination created
// with `outboxd destinations create --tls-client-cert --tls-client-key
// --header` delivers to a receiver that requires the client certificate.
// Refused parts answer 422 naming the field. No secret (header value,
// client secret, private key) appears in an API answer, the CLI's
// output, the audit trail or the server's logs.
//
// Mutations: the sink posting through Clients.Shared() instead of
// Clients.For(live) fails the wait for the first deliveries (every
// request answered 401, none with the header), and the mTLS receiver
// is never reached; the CLI dropping --tls-client-cert (Auth left
// empty) fails the same wait for the invoice.
func TestEndpointAuthenticationEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := testcert.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := serve(t, setup{poll: "200ms", env: []string{"SSL_CERT_FILE=" + caFile}})
	const (
		apiKey       = "api-key-77a1c0de"
		clientSecret = "client-secret-9f2c55aa"
	)
	tokens := tokenserver.New(t, "outboxd-acme", clientSecret)
	bearer := tokens.NewReceiver(t)
	status, body := rawCall(t, o, http.MethodPost, "/v1/tenants/acme/destinations", `{"url": "`+bearer.URL+`/hook", "events": ["order.*"],
		"headers": {"X-Api-Key": "`+apiKey+`"},
		"oauth2": {"token_url": "`+tokens.URL+`/token", "client_id": "outboxd-acme", "client_secret": "`+clientSecret+`", "scopes": ["webhooks"]}}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	var created destinations.Created
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	if created.Headers["X-Api-Key"] != destinations.Set || created.OAuth2 == nil || created.OAuth2.ClientSecret != destinations.Set {
		t.Errorf("create shows %s", body)
	}
	answers := []string{body}

	for _, order := range []string{"o1", "o2", "o3"} {
		o.publishHTTP(t, "order.created", "acme", order)
	}
	testrelay.WaitFor(t, deliveryTimeout, "three orders delivered with the token", func() bool { return bearer.Accepted() == 3 })
	for _, r := range bearer.Requests() {
		if r.Header.Get("X-Api-Key") != apiKey || r.Status != http.StatusNoContent {
			t.Fatalf("a delivery came without the header or was refused: %+v", r)
		}
	}
	if n := tokens.Fetches(); n != 1 {
		t.Errorf("three deliveries fetched %d tokens, want 1", n)
	}
	if tokens.Scope() != "webhooks" {
		t.Errorf("the token was asked for scope %q", tokens.Scope())
	}

	// Revoked: the next delivery's request is refused once, and sent
	// again with a new token within the same attempt.
	tokens.Revoke()
	o.publishHTTP(t, "order.created", "acme", "o4")
	testrelay.WaitFor(t, deliveryTimeout, "the fourth order delivered with a new token", func() bool { return bearer.Accepted() == 4 })
	if n := tokens.Fetches(); n != 2 {
		t.Errorf("after the revocation %d tokens were fetched in all, want 2", n)
	}
	var attempts int
	if err := o.pool.QueryRow(t.Context(), `SELECT max(attempts) FROM (SELECT attempts, headers FROM `+o.schema+`.messages
		UNION ALL SELECT attempts, headers FROM `+o.schema+`.messages_history) m WHERE headers->>'outboxd-destination' = $1`, created.ID).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Errorf("a delivery took %d attempts, want 1: the refused token is fetched again within the attempt", attempts)
	}

	// Mutual TLS, set with the CLI.
	certPEM, keyPEM := ca.IssueValid(t, "acme-outboxd", false)
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(certFile, []byte(certPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	mtls := ca.NewMTLSReceiver(t)
	out := o.run(t, "destinations", "create", "--tenant", "acme", "--url", mtls.URL+"/hook", "--events", "invoice.*",
		"--tls-client-cert", certFile, "--tls-client-key", keyFile, "--header", "X-Team=payments", "-o", "json")
	var withCert destinations.Created
	if err := json.Unmarshal([]byte(out), &withCert); err != nil {
		t.Fatalf("destinations create -o json: %v in %s", err, out)
	}
	if c := withCert.TLSClientCert; c == nil || c.Subject != "CN=acme-outboxd" || c.Key != destinations.Set {
		t.Errorf("the CLI shows %s", out)
	}
	answers = append(answers, out, o.run(t, "destinations", "get", withCert.ID, "--tenant", "acme"))
	o.publishHTTP(t, "invoice.paid", "acme", "i1")
	testrelay.WaitFor(t, deliveryTimeout, "the invoice at the receiver requiring the certificate", func() bool { return len(mtls.Peers()) == 1 })
	if peers, reqs := mtls.Peers(), mtls.Requests(); peers[0] != "acme-outboxd" || reqs[0].Get("X-Team") != "payments" {
		t.Errorf("the receiver saw certificate %q and headers %v", peers[0], reqs[0])
	}

	// Refused: 422 naming the field, nothing changed.
	expired, expiredKey := ca.Issue(t, "old", false, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	pemJSON := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodPost, "/v1/tenants/acme/destinations", `{"url": "` + bearer.URL + `/x", "headers": {"webhook-signature": "v1,forged"}}`, "headers.webhook-signature"},
		{http.MethodPatch, "/v1/tenants/acme/destinations/" + created.ID, `{"headers": {"Authorization": "Basic eA=="}}`, "headers.Authorization"},
		{http.MethodPatch, "/v1/tenants/acme/destinations/" + withCert.ID, `{"tls_client_cert": {"cert": ` + pemJSON(expired) + `, "key": ` + pemJSON(expiredKey) + `}}`, "tls_client_cert.cert: the certificate expired"},
		{http.MethodPost, "/v1/tenants/acme/destinations", `{"url": "` + bearer.URL + `/x", "oauth2": {"token_url": "` + tokens.URL + `", "client_id": "x"}}`, "oauth2.client_secret"},
	} {
		status, body := rawCall(t, o, c.method, c.path, c.body)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s; want 422 naming %s", c.method, c.path, status, body, c.want)
		}
		answers = append(answers, body)
	}

	// Nothing shows a secret.
	for _, path := range []string{"/v1/tenants/acme/destinations/" + created.ID, "/v1/tenants/acme/destinations", "/v1/audit"} {
		status, body := rawCall(t, o, http.MethodGet, path, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		answers = append(answers, body)
	}
	keyLine := strings.Split(keyPEM, "\n")[1]
	for _, text := range append(answers, o.srv.Logs()) {
		for _, secret := range []string{apiKey, clientSecret, keyLine, strings.Split(expiredKey, "\n")[1]} {
			if strings.Contains(text, secret) {
				t.Fatalf("a secret shows in %s", text)
			}
		}
	}
}
