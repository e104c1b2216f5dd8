package console

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/outboxd/outboxd/destinations"
)

// setDestinationAuth changes how a destination's requests authenticate
// (its headers, OAuth2 client credentials, TLS client certificate) from
// the form of its page, for an operator or its tenant: what the form
// leaves empty is kept, so that no secret need be shown to be kept
// (destinations.AuthPatch).
func (c *Console) setDestinationAuth(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	p, err := readAuthForm(r)
	if err != nil {
		c.destinationFailed(w, r, scope, "change the authentication", err)
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	if _, err := c.opt.Destinations.Update(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, destinations.Patch{AuthPatch: p}); err != nil {
		c.destinationFailed(w, r, scope, "change the authentication", err)
		return
	}
	c.logChange(r, scope, "authentication changed", id)
	http.Redirect(w, r, scope.page(id), http.StatusSeeOther)
}

// readAuthForm reads the authentication form: headers to set as "Name:
// value" lines, headers to remove by name (separated by commas or
// spaces), the OAuth2 fields (an empty secret keeps the stored one) or
// its removal, a certificate and key or their removal.
func readAuthForm(r *http.Request) (destinations.AuthPatch, error) {
	var p destinations.AuthPatch
	for i, line := range strings.Split(r.PostFormValue("headers"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return p, &formError{fmt.Sprintf("headers: line %d is not \"Name: value\"", i+1)}
		}
		if p.Headers == nil {
			p.Headers = map[string]*string{}
		}
		value = strings.TrimSpace(value)
		p.Headers[strings.TrimSpace(name)] = &value
	}
	for _, name := range strings.FieldsFunc(r.PostFormValue("remove_headers"), func(c rune) bool { return c == ',' || unicode.IsSpace(c) }) {
		if p.Headers == nil {
			p.Headers = map[string]*string{}
		}
		p.Headers[name] = nil
	}
	o := destinations.OAuth2{TokenURL: strings.TrimSpace(r.PostFormValue("oauth2_token_url")), ClientID: strings.TrimSpace(r.PostFormValue("oauth2_client_id")),
		ClientSecret: r.PostFormValue("oauth2_client_secret"), Scopes: strings.Fields(r.PostFormValue("oauth2_scopes"))}
	switch {
	case r.PostFormValue("oauth2_remove") != "":
		p.OAuth2.Set = true
	case o.TokenURL != "" || o.ClientID != "" || o.ClientSecret != "" || len(o.Scopes) > 0:
		p.OAuth2.Set, p.OAuth2.Value = true, &o
	}
	cert := destinations.TLSClientCert{Cert: strings.TrimSpace(r.PostFormValue("tls_client_cert")), Key: strings.TrimSpace(r.PostFormValue("tls_client_key"))}
	switch {
	case r.PostFormValue("tls_client_cert_remove") != "":
		p.TLSClientCert.Set = true
	case cert.Cert != "" || cert.Key != "":
		p.TLSClientCert.Set, p.TLSClientCert.Value = true, &cert
	}
	return p, nil
}
