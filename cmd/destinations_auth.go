package cmd

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/destinations"
)

// authFlags are a destination's authentication as create and update set
// it (docs/destinations.md, "Endpoint authentication").
type authFlags struct {
	headers, removeHeaders                       []string
	tokenURL, clientID, clientSecret, secretFile string
	scopes                                       []string
	certFile, keyFile                            string
	noOAuth2, noCert                             bool
}

// add declares the flags; update adds those that remove a part.
func (af *authFlags) add(c *cobra.Command, update bool) {
	fl := c.Flags()
	fl.StringArrayVar(&af.headers, "header", nil, "a `NAME=VALUE` header sent with every request (an API key the receiver checks); repeat for more; never shown once set")
	fl.StringVar(&af.tokenURL, "oauth2-token-url", "", "OAuth2 client credentials: the token endpoint's `URL`; the token goes in Authorization: Bearer")
	fl.StringVar(&af.clientID, "oauth2-client-id", "", "OAuth2 client credentials: the client `id`")
	fl.StringVar(&af.clientSecret, "oauth2-client-secret", "", "OAuth2 client credentials: the client `secret` (visible to other users of this machine: prefer --oauth2-client-secret-file)")
	fl.StringVar(&af.secretFile, "oauth2-client-secret-file", "", "OAuth2 client credentials: a `file` holding the client secret")
	fl.StringSliceVar(&af.scopes, "oauth2-scopes", nil, "OAuth2 client credentials: the `scopes` asked for, comma-separated")
	fl.StringVar(&af.certFile, "tls-client-cert", "", "a PEM `file` holding the TLS client certificate presented to the receiver (with --tls-client-key)")
	fl.StringVar(&af.keyFile, "tls-client-key", "", "a PEM `file` holding the TLS client certificate's private key, not encrypted")
	c.MarkFlagsRequiredTogether("tls-client-cert", "tls-client-key")
	c.MarkFlagsMutuallyExclusive("oauth2-client-secret", "oauth2-client-secret-file")
	if update {
		fl.StringArrayVar(&af.removeHeaders, "remove-header", nil, "a header `NAME` to stop sending; repeat for more")
		fl.BoolVar(&af.noOAuth2, "no-oauth2", false, "remove the OAuth2 client credentials")
		fl.BoolVar(&af.noCert, "no-tls-client-cert", false, "remove the TLS client certificate")
		c.MarkFlagsMutuallyExclusive("no-oauth2", "oauth2-token-url")
		c.MarkFlagsMutuallyExclusive("no-tls-client-cert", "tls-client-cert")
	}
}

// auth is the authentication the flags give a new destination.
func (af *authFlags) auth() (destinations.Auth, error) {
	var a destinations.Auth
	var err error
	if a.Headers, err = af.headerMap(); err != nil {
		return a, err
	}
	if af.oauth2Given() {
		if a.OAuth2, err = af.oauth2(); err != nil {
			return a, err
		}
	}
	if af.certFile != "" {
		if a.TLSClientCert, err = af.cert(); err != nil {
			return a, err
		}
	}
	return a, nil
}

// patch is the change the flags make to a destination's authentication:
// the headers given set, those removed dropped, the others kept; OAuth2
// fields not given keep their stored values.
func (af *authFlags) patch() (destinations.AuthPatch, error) {
	var p destinations.AuthPatch
	headers, err := af.headerMap()
	if err != nil {
		return p, err
	}
	for _, name := range af.removeHeaders {
		if p.Headers == nil {
			p.Headers = map[string]*string{}
		}
		p.Headers[name] = nil
	}
	for name, v := range headers {
		if p.Headers == nil {
			p.Headers = map[string]*string{}
		}
		p.Headers[name] = &v
	}
	switch {
	case af.noOAuth2:
		p.OAuth2.Set = true
	case af.oauth2Given():
		if p.OAuth2.Value, err = af.oauth2(); err != nil {
			return p, err
		}
		p.OAuth2.Set = true
	}
	switch {
	case af.noCert:
		p.TLSClientCert.Set = true
	case af.certFile != "":
		if p.TLSClientCert.Value, err = af.cert(); err != nil {
			return p, err
		}
		p.TLSClientCert.Set = true
	}
	return p, nil
}

// headerMap reads the --header flags.
func (af *authFlags) headerMap() (map[string]string, error) {
	if len(af.headers) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(af.headers))
	for _, h := range af.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--header: want NAME=VALUE, got a value without \"=\"")
		}
		out[name] = value
	}
	return out, nil
}

// oauth2Given reports whether any OAuth2 flag is given.
func (af *authFlags) oauth2Given() bool {
	return af.tokenURL != "" || af.clientID != "" || af.clientSecret != "" || af.secretFile != "" || len(af.scopes) > 0
}

// oauth2 reads the OAuth2 flags, the secret from its file if given.
func (af *authFlags) oauth2() (*destinations.OAuth2, error) {
	o := &destinations.OAuth2{TokenURL: af.tokenURL, ClientID: af.clientID, ClientSecret: af.clientSecret, Scopes: af.scopes}
	if af.secretFile != "" {
		b, err := os.ReadFile(af.secretFile)
		if err != nil {
			return nil, fmt.Errorf("--oauth2-client-secret-file: %w", err)
		}
		o.ClientSecret = strings.TrimSpace(string(b))
	}
	return o, nil
}

// cert reads the certificate and key files.
func (af *authFlags) cert() (*destinations.TLSClientCert, error) {
	cert, err := os.ReadFile(af.certFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-cert: %w", err)
	}
	key, err := os.ReadFile(af.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-key: %w", err)
	}
	return &destinations.TLSClientCert{Cert: string(cert), Key: string(key)}, nil
}

// writeAuthSummary prints how a destination's requests authenticate,
// never a secret: the header names, the OAuth2 client and token endpoint
// (redacted), the certificate's subject and expiry.
func writeAuthSummary(w io.Writer, s destinations.AuthSummary) {
	if len(s.Headers) == 0 && s.OAuth2 == nil && s.TLSClientCert == nil {
		fmt.Fprintln(w, "authentication: the signature only")
		return
	}
	fmt.Fprintln(w, "authentication:")
	if len(s.Headers) > 0 {
		names := slices.Sorted(maps.Keys(s.Headers))
		for i, n := range names {
			names[i] = terminalText(n)
		}
		fmt.Fprintf(w, "  headers: %s (values set)\n", strings.Join(names, ", "))
	}
	if o := s.OAuth2; o != nil {
		fmt.Fprintf(w, "  oauth2: client %s at %s, secret set", terminalText(o.ClientID), terminalText(o.TokenURL))
		if len(o.Scopes) > 0 {
			fmt.Fprintf(w, ", scopes %s", terminalText(strings.Join(o.Scopes, " ")))
		}
		fmt.Fprintln(w)
	}
	if c := s.TLSClientCert; c != nil {
		fmt.Fprintf(w, "  tls client certificate: %s, until %s (key set)\n", terminalText(c.Subject), c.NotAfter.Format(time.RFC3339))
	}
}
