package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/testcert"
)

// TestDestinationAuthenticationThroughTheAPI: a destination is created
// with headers, OAuth2 client credentials and a TLS client certificate,
// and answered with each secret shown as "set"; GET shows the same; a
// PATCH merges (a header removed with null, the OAuth2 secret kept when
// left out) and null removes the certificate; refused parts answer 422
// naming the field. Every request and answer matches openapi.json.
//
// Mutation: openapi.json's Destination schema without oauth2 (its
// additionalProperties false) fails every answer's validation.
func TestDestinationAuthenticationThroughTheAPI(t *testing.T) {
	t.Parallel()
	_, router := openAPISpec(t)
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		api.Destinations = api.Outbox.Destinations(newKeyring(t))
	})
	c := &contract{t: t, a: a, router: router, covered: map[string]bool{}}
	ca, err := testcert.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM := ca.IssueValid(t, "acme-outboxd", false)
	pem := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	const base = "/v1/tenants/acme/destinations"
	raw := c.do(exchange{method: "POST", path: base, status: 201, body: `{"url": "https://hooks.acme.example/in",
		"headers": {"X-Api-Key": "api-key-77a1c0de", "X-Team": "payments"},
		"oauth2": {"token_url": "https://auth.acme.example/token", "client_id": "outboxd-acme", "client_secret": "client-secret-9f2c55aa", "scopes": ["webhooks"]},
		"tls_client_cert": {"cert": ` + pem(certPEM) + `, "key": ` + pem(keyPEM) + `}}`})
	var created struct{ ID string }
	if err := json.Unmarshal(raw, &created); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"api-key-77a1c0de", "client-secret-9f2c55aa", strings.Split(keyPEM, "\n")[1]}
	one := base + "/" + created.ID
	shown := []string{string(raw), string(c.do(exchange{method: "GET", path: one, status: 200})), string(c.do(exchange{method: "GET", path: base, status: 200}))}
	for _, want := range []string{`"X-Api-Key":"set"`, `"client_secret":"set"`, `"subject":"CN=acme-outboxd"`} {
		if !strings.Contains(shown[1], want) {
			t.Errorf("GET shows %s, without %s", shown[1], want)
		}
	}
	patched := string(c.do(exchange{method: "PATCH", path: one, status: 200,
		body: `{"headers": {"X-Team": null}, "oauth2": {"scopes": ["webhooks", "events"]}, "tls_client_cert": null}`}))
	if !strings.Contains(patched, `"headers":{"X-Api-Key":"set"}`) || !strings.Contains(patched, `"client_secret":"set"`) ||
		!strings.Contains(patched, `"tls_client_cert":null`) || !strings.Contains(patched, `"scopes":["webhooks","events"]`) {
		t.Errorf("after the PATCH: %s", patched)
	}
	shown = append(shown, patched)
	for body, says := range map[string]string{
		`{"headers": {"Content-Length": "1"}}`:                           "headers.Content-Length",
		`{"headers": {"X-Api-Key": "a\r\nb"}}`:                           "headers.X-Api-Key",
		`{"oauth2": {"token_url": "ftp://auth.acme.example/token"}}`:     "oauth2.token_url",
		`{"tls_client_cert": {"cert": ` + pem(certPEM) + `, "key": ""}}`: "tls_client_cert.key",
	} {
		refused := string(c.do(exchange{method: "PATCH", path: one, status: 422, body: body}))
		if !strings.Contains(refused, says) {
			t.Errorf("PATCH %s: %s; want 422 naming %s", body, refused, says)
		}
		shown = append(shown, refused)
	}
	for _, s := range shown {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Fatalf("an answer shows a secret: %s", s)
			}
		}
	}
}
