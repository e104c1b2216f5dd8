package destinations

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/netguard"
)

// scrubWindow is how much of a receiver's answer to an authenticated
// request is read ahead and rid of the request's secrets (see
// scrubbedBody): more than a delivery records of it (sink.MaxAnswerBytes)
// or quotes in an error.
const scrubWindow = 64 << 10

// minClientSweep is how many cached clients Clients holds before it
// first drops those not used since the last sweep: the clients of
// deleted destinations, and of destinations that stopped receiving.
const minClientSweep = 256

// Clients hands out the HTTP client each destination's requests go
// through, under one network policy: the policy's shared client for a
// destination without authentication, and for one with it a client
// built once per destination and revision (a change of the destination
// builds a new one), which presents its TLS client certificate, sets its
// headers and carries its OAuth2 token, fetched from its token endpoint
// under the same policy, cached until it expires and fetched again when
// the receiver answers 401. It is safe for concurrent use.
type Clients struct {
	network *Network
	timeout time.Duration
	tp      trace.TracerProvider
	shared  *http.Client

	mu      sync.Mutex
	byID    map[string]*cachedClient
	sweepAt int
}

// cachedClient is one destination's client at one revision.
type cachedClient struct {
	revision int64
	client   *http.Client
	used     bool // since the last sweep
}

// Clients returns the clients delivering under n, each request bounded
// by timeout and traced with tp (nil: the global provider).
func (n *Network) Clients(timeout time.Duration, tp trace.TracerProvider) *Clients {
	return &Clients{network: n, timeout: timeout, tp: tp, shared: n.HTTPClient(timeout, tp),
		byID: map[string]*cachedClient{}, sweepAt: minClientSweep}
}

// Shared is the client of the destinations without authentication.
func (c *Clients) Shared() *http.Client { return c.shared }

// For returns the client l's requests go through.
func (c *Clients) For(l *Live) (*http.Client, error) {
	if l.auth.empty() {
		return c.shared, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[l.ID]; ok && e.revision == l.Revision {
		e.used = true
		return e.client, nil
	}
	client, err := c.build(l)
	if err != nil {
		return nil, fmt.Errorf("destination %s: %w", l.ID, err)
	}
	c.byID[l.ID] = &cachedClient{revision: l.Revision, client: client, used: true}
	if len(c.byID) >= c.sweepAt {
		for id, e := range c.byID {
			if !e.used {
				delete(c.byID, id)
			}
			e.used = false
		}
		c.sweepAt = max(minClientSweep, 2*len(c.byID))
	}
	return client, nil
}

// build makes l's client: the policy's, or one of its own presenting its
// certificate, wrapped to authenticate each request.
func (c *Clients) build(l *Live) (*http.Client, error) {
	base := c.shared
	if cert := l.auth.TLSClientCert; cert != nil {
		pair, err := cert.pair()
		if err != nil {
			return nil, err
		}
		// A transport of its own: connections made with one destination's
		// certificate are never reused for another's requests.
		base = c.network.httpClient(c.timeout, c.tp, &pair)
	}
	if len(l.auth.Headers) == 0 && l.auth.OAuth2 == nil {
		return base, nil
	}
	t := &authTransport{next: base.Transport, headers: http.Header{}}
	for name, v := range l.auth.Headers {
		t.headers.Set(name, v)
		t.secrets = append(t.secrets, v)
	}
	if o := l.auth.OAuth2; o != nil {
		t.secrets = append(t.secrets, o.ClientSecret)
		t.tokens = &tokenSource{network: c.network, client: base, config: clientcredentials.Config{
			ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL, Scopes: o.Scopes}}
	}
	return &http.Client{Transport: t, Timeout: base.Timeout, CheckRedirect: base.CheckRedirect}, nil
}

// authTransport sets a destination's headers and bearer token on each
// request, and rids the answer of them.
type authTransport struct {
	next    http.RoundTripper
	headers http.Header
	secrets []string     // the header values and the client secret
	tokens  *tokenSource // nil without OAuth2
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for name, v := range t.headers {
		r.Header[name] = v
	}
	if t.tokens == nil {
		return t.scrubbed(t.next.RoundTrip(r))
	}
	tok, fresh, err := t.tokens.get(req.Context())
	if err != nil {
		closeBody(req)
		return nil, err
	}
	tok.SetAuthHeader(r)
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return t.scrubbed(resp, err, tok.AccessToken)
	}
	t.tokens.forget(tok)
	if fresh || req.GetBody == nil {
		return t.scrubbed(resp, nil, tok.AccessToken)
	}
	// A token from the cache was refused: revoked before it expired, or
	// the receiver's keys changed. One more try with a new one spares
	// the delivery an attempt; a new token refused is the answer.
	body, err := req.GetBody()
	if err != nil {
		return resp, nil
	}
	netguard.DiscardBody(resp.Body)
	if tok, _, err = t.tokens.get(req.Context()); err != nil {
		_ = body.Close()
		return nil, err
	}
	retry := r.Clone(req.Context())
	retry.Body = body
	tok.SetAuthHeader(retry)
	resp, err = t.next.RoundTrip(retry)
	return t.scrubbed(resp, err, tok.AccessToken)
}

// scrubbed is resp with the first scrubWindow bytes of its body rid of
// the request's secrets (the header values, the client secret, the
// token): a receiver that echoes the request in its answer, as debugging
// endpoints do, must not put them in the attempt's record, which
// operators and the tenant's portal read.
func (t *authTransport) scrubbed(resp *http.Response, err error, token ...string) (*http.Response, error) {
	if err != nil {
		return resp, err
	}
	scrub := secret.NewScrubber(append(token, t.secrets...)...)
	head, readErr := io.ReadAll(io.LimitReader(resp.Body, scrubWindow))
	var rest io.Reader = resp.Body
	if readErr != nil {
		rest = errReader{readErr} // what could not be read is the answer's reader's to report
	}
	// The scrubbed head may be shorter: the length no longer holds.
	resp.Body = bodyReader{io.MultiReader(strings.NewReader(scrub.String(string(head))), rest), resp.Body}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// bodyReader reads from one reader and closes another: a scrubbed
// answer's head, then the rest of its body.
type bodyReader struct {
	io.Reader
	io.Closer
}

// errReader fails every read with its error.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// closeBody closes a request's body, as a RoundTripper must even when it
// fails before sending it.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// tokenSource fetches a destination's OAuth2 token with the client
// credentials grant and keeps it until it expires (less the oauth2
// package's margin of 10 seconds) or a receiver refuses it. One fetch at
// a time: concurrent deliveries wait for it and share its token.
type tokenSource struct {
	network *Network
	client  *http.Client // fetches under the policy, with the certificate when there is one
	config  clientcredentials.Config

	mu    sync.Mutex
	token *oauth2.Token
}

// get returns the cached token, or a new one (fresh).
func (s *tokenSource) get(ctx context.Context) (tok *oauth2.Token, fresh bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token.Valid() {
		return s.token, false, nil
	}
	if err := s.network.CheckURL(s.config.TokenURL); err != nil {
		return nil, false, sink.Permanent(fmt.Errorf("oauth2 token endpoint: %w", err))
	}
	tok, err = s.config.Token(context.WithValue(ctx, oauth2.HTTPClient, s.client))
	if err != nil {
		return nil, false, tokenError(err)
	}
	s.token = tok
	return tok, true, nil
}

// forget drops tok if it is still the cached token: the next request
// fetches another.
func (s *tokenSource) forget(tok *oauth2.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == tok {
		s.token = nil
	}
}

// tokenError says why a token could not be fetched without repeating
// the token endpoint's URL (it may hold a credential) or its answer's
// body (what a tenant's server says is not for every reader): the status
// and RFC 6749's error code. An address the policy refuses stays one
// (netguard.ErrNonPublicAddress), so the delivery is not retried.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		msg := fmt.Sprintf("the oauth2 token endpoint answered %d", re.Response.StatusCode)
		if re.ErrorCode != "" {
			msg += " (" + safetext.Text(re.ErrorCode, 64) + ")"
		}
		return errors.New(msg)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	if errors.Is(err, netguard.ErrNonPublicAddress) {
		return sink.Permanent(fmt.Errorf("oauth2 token endpoint: %w", err))
	}
	return fmt.Errorf("oauth2 token endpoint: %w", err)
}

// httpClient is HTTPClient presenting cert (nil: none) to servers that
// ask for a client certificate.
func (n *Network) httpClient(timeout time.Duration, tp trace.TracerProvider, cert *tls.Certificate) *http.Client {
	policy := n.policy
	return netguard.NewHTTPClient(netguard.HTTPClientOptions{Timeout: timeout, Policy: &policy, Proxy: n.proxy,
		TracerProvider: tp, ClientCertificate: cert})
}
