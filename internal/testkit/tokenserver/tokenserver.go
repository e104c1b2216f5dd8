// Package tokenserver is an OAuth2 token endpoint for tests (RFC 6749,
// the client credentials grant, section 4.4) and a receiver that accepts
// only the endpoint's newest token, so that a test can count the tokens
// fetched, revoke one, and see which token each request carried.
package tokenserver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// DefaultExpiresIn is the lifetime, in seconds, of the tokens an
// Endpoint grants unless ExpiresIn says otherwise: longer than any test.
const DefaultExpiresIn = 3600

// Endpoint grants client_credentials to one client: each grant is a new
// token, Token(1), Token(2), ..., valid for ExpiresIn seconds. A request with
// other credentials is answered 401 invalid_client, with a body echoing
// the secret it was sent, as a careless endpoint might.
type Endpoint struct {
	*httptest.Server
	clientID, clientSecret string
	// ExpiresIn is the lifetime of the next tokens, in seconds.
	ExpiresIn atomic.Int64
	issued    atomic.Int64
	fetches   atomic.Int64
	mu        sync.Mutex
	scope     string
}

// New starts an endpoint for the client id and secret, closed when the
// test ends.
func New(t testing.TB, clientID, clientSecret string) *Endpoint {
	t.Helper()
	e := &Endpoint{clientID: clientID, clientSecret: clientSecret}
	e.ExpiresIn.Store(DefaultExpiresIn)
	e.Server = httptest.NewServer(http.HandlerFunc(e.grant))
	t.Cleanup(e.Close)
	return e
}

func (e *Endpoint) grant(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	w.Header().Set("Content-Type", "application/json")
	if r.PostFormValue("grant_type") != "client_credentials" || id != e.clientID || secret != e.clientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": "invalid_client", "error_description": "bad secret %s"}`, secret)
		return
	}
	e.mu.Lock()
	e.scope = r.PostFormValue("scope")
	e.mu.Unlock()
	e.fetches.Add(1)
	fmt.Fprintf(w, `{"access_token": %q, "token_type": "Bearer", "expires_in": %d}`, Token(e.issued.Add(1)), e.ExpiresIn.Load())
}

// Token is the n-th token an Endpoint grants: long enough to be a secret
// a scrubber looks for.
func Token(n int64) string { return fmt.Sprintf("access-token-%d", n) }

// Fetches is how many tokens were granted.
func (e *Endpoint) Fetches() int64 { return e.fetches.Load() }

// Scope is the scope the last grant asked for.
func (e *Endpoint) Scope() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.scope
}

// Revoke revokes every token granted so far: the receiver accepts only
// the next one.
func (e *Endpoint) Revoke() { e.issued.Add(1) }

// Current is the Authorization the receiver accepts, "Bearer " and the
// newest token granted, or after Revoke the next.
func (e *Endpoint) Current() string { return "Bearer " + Token(e.issued.Load()) }

// Request is one request a Receiver got: its headers and the status it
// was answered.
type Request struct {
	Header http.Header
	Status int
}

// Receiver answers 204 to requests carrying its endpoint's current
// token, 401 to the others, and records each.
type Receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []Request
}

// NewReceiver starts a receiver for e's tokens, closed when the test
// ends.
func (e *Endpoint) NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		status := http.StatusNoContent
		if req.Header.Get("Authorization") != e.Current() {
			status = http.StatusUnauthorized
		}
		r.mu.Lock()
		r.got = append(r.got, Request{Header: req.Header.Clone(), Status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// Requests are the requests received so far, in order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.got...)
}

// Accepted counts the requests answered 204.
func (r *Receiver) Accepted() int {
	n := 0
	for _, req := range r.Requests() {
		if req.Status == http.StatusNoContent {
			n++
		}
	}
	return n
}
