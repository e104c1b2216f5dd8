package destinations

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// Bounds of a destination's authentication (Auth).
const (
	// MaxAuthHeaders bounds how many headers a destination sets.
	MaxAuthHeaders = 20
	// MaxHeaderNameBytes and MaxHeaderValueBytes bound each of them: an
	// API key or a bearer token fits, a receiver's header limit (8 KiB
	// in many servers, for all headers) is not reached by a few.
	MaxHeaderNameBytes  = 128
	MaxHeaderValueBytes = 4096
	// MaxOAuth2FieldBytes bounds the client id and the client secret.
	MaxOAuth2FieldBytes = 1024
	// MaxOAuth2Scopes bounds the scopes asked for, each of at most
	// MaxOAuth2ScopeBytes.
	MaxOAuth2Scopes     = 20
	MaxOAuth2ScopeBytes = 256
	// MaxTLSClientCertBytes bounds a certificate chain and its key in
	// PEM, together: a chain of a few certificates with an RSA-4096 key
	// is about 10 KiB.
	MaxTLSClientCertBytes = 64 << 10
)

// Set is how a secret value that is set is shown: the value itself never
// is, once set.
const Set = "set"

// Auth is how a destination's requests authenticate to its receiver
// besides the Standard Webhooks signature, each part chosen by its
// tenant: headers (an API key the receiver's gateway checks), OAuth2
// client credentials (a bearer token fetched from the tenant's token
// endpoint) and a TLS client certificate (mutual TLS). It is sealed
// like the signing secrets (Keyring) and never shown once set; what may
// be shown of it is its AuthSummary.
type Auth struct {
	// Headers are sent with every request, name -> value. Headers that
	// outboxd or HTTP itself sets are refused (see reservedHeaders).
	Headers map[string]string `json:"headers,omitempty"`
	// OAuth2 asks the token endpoint for a token with the client
	// credentials grant and sends it as "Authorization: Bearer".
	OAuth2 *OAuth2 `json:"oauth2,omitempty"`
	// TLSClientCert is presented when the receiver asks for a client
	// certificate.
	TLSClientCert *TLSClientCert `json:"tls_client_cert,omitempty"`
}

// OAuth2 are OAuth2 client credentials (RFC 6749, section 4.4).
type OAuth2 struct {
	// TokenURL is the token endpoint, http or https, reached under the
	// same network policy as the destinations' URLs.
	TokenURL     string   `json:"token_url"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret"`
	Scopes       []string `json:"scopes,omitempty"`
}

// TLSClientCert is a client certificate and its private key, in PEM: the
// certificate first, then the chain up to (not including) the root.
type TLSClientCert struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// AuthSummary is what may be shown of a destination's Auth: which parts
// are set, never a secret value ("set" stands for each). Headers is
// empty, OAuth2 and TLSClientCert nil, when not set.
type AuthSummary struct {
	// Headers maps each header's name to "set".
	Headers map[string]string `json:"headers"`
	// OAuth2 shows the token endpoint (its credentials redacted, see
	// RedactURL), the client id and scopes; its secret as "set".
	OAuth2 *OAuth2Summary `json:"oauth2"`
	// TLSClientCert shows the certificate's subject and expiry; both
	// the certificate and the key as "set".
	TLSClientCert *TLSClientCertSummary `json:"tls_client_cert"`
}

// OAuth2Summary is what may be shown of OAuth2 client credentials.
type OAuth2Summary struct {
	TokenURL     string   `json:"token_url"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret"`
	Scopes       []string `json:"scopes"`
}

// TLSClientCertSummary is what may be shown of a client certificate.
type TLSClientCertSummary struct {
	Cert     string    `json:"cert"`
	Key      string    `json:"key"`
	Subject  string    `json:"subject"`
	NotAfter time.Time `json:"not_after"`
}

// AuthPatch changes a destination's authentication (fields of the body of
// PATCH), as a JSON merge patch (RFC 7396) would: a header set to a
// string is set, to null removed, headers not named are kept; oauth2 and
// tls_client_cert set to null are removed, set to an object replace what
// was there, except that an OAuth2 field left out (or a token_url sent
// back as shown, redacted) keeps its stored value, so an edit form need
// not hold the client secret.
type AuthPatch struct {
	Headers       map[string]*string      `json:"headers"`
	OAuth2        Nullable[OAuth2]        `json:"oauth2"`
	TLSClientCert Nullable[TLSClientCert] `json:"tls_client_cert"`
}

// Nullable is a PATCH field that is left out (Set false), null (Set,
// Value nil) or a value.
type Nullable[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSON records that the field was present, and its value unless
// it is null. Unknown fields inside it are refused, as the whole body's
// are.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set, n.Value = true, nil
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v T
	if err := dec.Decode(&v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// MarshalJSON writes the value, or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) { return json.Marshal(n.Value) }

// empty reports whether a sets nothing.
func (a Auth) empty() bool {
	return len(a.Headers) == 0 && a.OAuth2 == nil && a.TLSClientCert == nil
}

// parts names the parts a sets, for the audit trail (never their values).
func (a Auth) parts() []string {
	var out []string
	if len(a.Headers) > 0 {
		out = append(out, "headers")
	}
	if a.OAuth2 != nil {
		out = append(out, "oauth2")
	}
	if a.TLSClientCert != nil {
		out = append(out, "tls_client_cert")
	}
	return out
}

// fields names the fields p changes, as JSON names them.
func (p AuthPatch) fields() []string {
	var out []string
	if p.Headers != nil {
		out = append(out, "headers")
	}
	if p.OAuth2.Set {
		out = append(out, "oauth2")
	}
	if p.TLSClientCert.Set {
		out = append(out, "tls_client_cert")
	}
	return out
}

// changes reports whether p changes anything.
func (p AuthPatch) changes() bool { return len(p.fields()) > 0 }

// apply returns a with p merged over it (see AuthPatch).
func (p AuthPatch) apply(a Auth) Auth {
	out := Auth{Headers: maps.Clone(a.Headers), OAuth2: a.OAuth2, TLSClientCert: a.TLSClientCert}
	for name, v := range p.Headers {
		// A name matches the stored one whatever its case, as HTTP
		// compares them.
		for stored := range out.Headers {
			if strings.EqualFold(stored, name) {
				delete(out.Headers, stored)
			}
		}
		if v != nil {
			if out.Headers == nil {
				out.Headers = map[string]string{}
			}
			out.Headers[name] = *v
		}
	}
	if p.OAuth2.Set {
		out.OAuth2 = p.OAuth2.Value
		if old, next := a.OAuth2, p.OAuth2.Value; old != nil && next != nil {
			merged := *next
			if merged.TokenURL == "" || merged.TokenURL == RedactURL(old.TokenURL) {
				merged.TokenURL = old.TokenURL
			}
			if merged.ClientID == "" {
				merged.ClientID = old.ClientID
			}
			if merged.ClientSecret == "" || merged.ClientSecret == Set {
				merged.ClientSecret = old.ClientSecret
			}
			if merged.Scopes == nil {
				merged.Scopes = old.Scopes
			}
			out.OAuth2 = &merged
		}
	}
	if p.TLSClientCert.Set {
		out.TLSClientCert = p.TLSClientCert.Value
	}
	return out
}

// reservedHeaders are the headers a destination may not set, by their
// canonical names: HTTP's own framing and hop-by-hop headers (RFC 9110
// section 7.6.1), what outboxd sets on every delivery (the Standard
// Webhooks headers, the body's type, the trace context), and Expect,
// which would change how the request is sent.
var reservedHeaders = map[string]string{
	"Connection": "hop-by-hop", "Keep-Alive": "hop-by-hop", "Proxy-Authenticate": "hop-by-hop",
	"Proxy-Authorization": "hop-by-hop", "Proxy-Connection": "hop-by-hop", "Te": "hop-by-hop",
	"Trailer": "hop-by-hop", "Transfer-Encoding": "hop-by-hop", "Upgrade": "hop-by-hop",
	"Host": "set by HTTP", "Content-Length": "set by HTTP", "Expect": "set by HTTP",
	"Content-Type": "set by outboxd", "Content-Encoding": "set by outboxd",
	"Webhook-Id": "set by outboxd (Standard Webhooks)", "Webhook-Signature": "set by outboxd (Standard Webhooks)",
	"Webhook-Timestamp": "set by outboxd (Standard Webhooks)",
	"Traceparent":       "set by outboxd (trace context)", "Tracestate": "set by outboxd (trace context)",
	"Baggage": "set by outboxd (trace context)",
}

// checked validates a and returns its summary; each error is an
// *InputError naming the field at fault (headers.<name>, oauth2.<field>,
// tls_client_cert.<field>) and never repeating a secret value.
func (a Auth) checked(now time.Time) (AuthSummary, error) {
	sum := AuthSummary{Headers: map[string]string{}}
	if err := a.checkHeaders(); err != nil {
		return sum, err
	}
	for name := range a.Headers {
		sum.Headers[name] = Set
	}
	if o := a.OAuth2; o != nil {
		if err := o.check(); err != nil {
			return sum, err
		}
		sum.OAuth2 = &OAuth2Summary{TokenURL: RedactURL(o.TokenURL), ClientID: o.ClientID, ClientSecret: Set, Scopes: nonNil(o.Scopes)}
	}
	if c := a.TLSClientCert; c != nil {
		leaf, err := c.check(now)
		if err != nil {
			return sum, err
		}
		sum.TLSClientCert = &TLSClientCertSummary{Cert: Set, Key: Set, Subject: safetext.Text(leaf.Subject.String(), MaxDescriptionBytes), NotAfter: leaf.NotAfter.UTC()}
	}
	return sum, nil
}

// checkHeaders refuses headers that are malformed, too many or too
// large, set twice (HTTP names are case-insensitive), reserved, or that
// would clash with OAuth2's Authorization.
func (a Auth) checkHeaders() error {
	if len(a.Headers) > MaxAuthHeaders {
		return inputErrorf("headers: %d headers, over the limit of %d", len(a.Headers), MaxAuthHeaders)
	}
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(a.Headers)) {
		shown := safetext.Text(name, MaxHeaderNameBytes)
		switch canonical := http.CanonicalHeaderKey(name); {
		case len(name) > MaxHeaderNameBytes:
			return inputErrorf("headers.%s: the name is %d bytes, over the limit of %d", shown, len(name), MaxHeaderNameBytes)
		case !httpguts.ValidHeaderFieldName(name):
			return inputErrorf("headers.%s: not a valid header name (letters, digits and !#$%%&'*+-.^_`|~ only)", shown)
		case reservedHeaders[canonical] != "":
			return inputErrorf("headers.%s: a destination cannot set it (%s)", shown, reservedHeaders[canonical])
		case canonical == "Authorization" && a.OAuth2 != nil:
			return inputErrorf("headers.%s: oauth2 sets it (a bearer token); remove one of them", shown)
		case seen[canonical] != "":
			return inputErrorf("headers.%s: given twice (as %s too): header names ignore case", shown, safetext.Text(seen[canonical], MaxHeaderNameBytes))
		}
		seen[http.CanonicalHeaderKey(name)] = name
		v := a.Headers[name]
		switch {
		case v == "":
			return inputErrorf("headers.%s: the value is empty", shown)
		case len(v) > MaxHeaderValueBytes:
			return inputErrorf("headers.%s: the value is %d bytes, over the limit of %d", shown, len(v), MaxHeaderValueBytes)
		case !httpguts.ValidHeaderFieldValue(v) || strings.TrimSpace(v) != v:
			// HTTP would strip the spaces, and a control character would
			// split the request.
			return inputErrorf("headers.%s: the value holds control characters or spaces at either end", shown)
		}
	}
	return nil
}

// check refuses client credentials that cannot be used.
func (o *OAuth2) check() error {
	switch {
	case len(o.TokenURL) > MaxURLBytes:
		return inputErrorf("oauth2.token_url is %d bytes, over the limit of %d", len(o.TokenURL), MaxURLBytes)
	case o.ClientID == "":
		return inputErrorf("oauth2.client_id is required")
	case o.ClientSecret == "":
		return inputErrorf("oauth2.client_secret is required")
	case len(o.ClientID) > MaxOAuth2FieldBytes:
		return inputErrorf("oauth2.client_id is %d bytes, over the limit of %d", len(o.ClientID), MaxOAuth2FieldBytes)
	case len(o.ClientSecret) > MaxOAuth2FieldBytes:
		return inputErrorf("oauth2.client_secret is %d bytes, over the limit of %d", len(o.ClientSecret), MaxOAuth2FieldBytes)
	case safetext.Text(o.ClientID, MaxOAuth2FieldBytes) != o.ClientID:
		return inputErrorf("oauth2.client_id holds characters that are not printable")
	case len(o.Scopes) > MaxOAuth2Scopes:
		return inputErrorf("oauth2.scopes: %d scopes, over the limit of %d", len(o.Scopes), MaxOAuth2Scopes)
	}
	if err := standardwebhooks.CheckURL(o.TokenURL); err != nil {
		return inputErrorf("oauth2.token_url: %v", err)
	}
	for i, s := range o.Scopes {
		// RFC 6749 section 3.3: printable ASCII but space, '"' and '\'.
		if s == "" || len(s) > MaxOAuth2ScopeBytes || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }) {
			return inputErrorf("oauth2.scopes[%d]: a scope is 1 to %d printable ASCII characters without spaces, quotes or backslashes", i, MaxOAuth2ScopeBytes)
		}
	}
	return nil
}

// check parses the certificate and its key, and refuses a key that does
// not match, or a certificate expired at now; it returns the leaf.
func (c *TLSClientCert) check(now time.Time) (*x509.Certificate, error) {
	if n := len(c.Cert) + len(c.Key); n > MaxTLSClientCertBytes {
		return nil, inputErrorf("tls_client_cert is %d bytes, over the limit of %d", n, MaxTLSClientCertBytes)
	}
	block, _ := pem.Decode([]byte(c.Cert))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, inputErrorf("tls_client_cert.cert: want a PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, inputErrorf("tls_client_cert.cert: the certificate does not parse")
	}
	if block, _ := pem.Decode([]byte(c.Key)); block == nil || !strings.HasSuffix(block.Type, "PRIVATE KEY") {
		return nil, inputErrorf("tls_client_cert.key: want a PEM private key (-----BEGIN PRIVATE KEY-----), not encrypted")
	}
	if _, err := tls.X509KeyPair([]byte(c.Cert), []byte(c.Key)); err != nil {
		// The standard library's words, which never quote the key.
		return nil, inputErrorf("tls_client_cert.key: %s", strings.TrimPrefix(err.Error(), "tls: "))
	}
	if now.After(leaf.NotAfter) {
		return nil, inputErrorf("tls_client_cert.cert: the certificate expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return leaf, nil
}

// pair is c as the TLS stack presents it.
func (c *TLSClientCert) pair() (tls.Certificate, error) {
	pair, err := tls.X509KeyPair([]byte(c.Cert), []byte(c.Key))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("its client certificate does not load: %s", strings.TrimPrefix(err.Error(), "tls: "))
	}
	return pair, nil
}
