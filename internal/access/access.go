// Package access says who a request of the HTTP API or the console comes
// from and what they may do: named bearer tokens (http.tokens, and
// http.token as the one admin token), each with a role, and the user and
// role an authenticating proxy in front of outboxd names in headers,
// believed only from the proxy's addresses. Both server/api and server/console
// authenticate through it, so the two cannot disagree.
package access

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Role is what an identity may do.
type Role string

// The roles, each granting the actions listed.
const (
	// RoleRead reads: stats, message lookups, listings of dead letters,
	// messages and the audit trail.
	RoleRead Role = "read"
	// RoleProduce enqueues messages and publishes events.
	RoleProduce Role = "produce"
	// RoleOperate reads and acts: pauses and resumes sinks (which forces
	// their circuit breakers), forgets stale pauses, redrives and purges
	// dead letters.
	RoleOperate Role = "operate"
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
)

// Roles are the roles, in the order the documentation lists them.
var Roles = []Role{RoleRead, RoleProduce, RoleOperate, RoleAdmin}

// ParseRole returns the role named s, or an error listing the roles.
func ParseRole(s string) (Role, error) {
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", fmt.Errorf("want one of read, produce, operate or admin, got %q", s)
}

// Allows reports whether r may do what need grants.
func (r Role) Allows(need Role) bool {
	switch r {
	case RoleAdmin:
		return true
	case RoleOperate:
		return need == RoleRead || need == RoleOperate
	}
	return r == need
}

// LegacyTokenName names the admin token of http.token.
const LegacyTokenName = "admin"

// Token is one configured bearer token: its name (who, in the audit
// trail and the console), the SHA-256 of its value, and its role.
type Token struct {
	Name   string
	SHA256 [sha256.Size]byte
	Role   Role
}

// TokenOf is the Token with value secret.
func TokenOf(name, secret string, role Role) Token {
	return Token{Name: name, SHA256: sha256.Sum256([]byte(secret)), Role: role}
}

// ParseDigest reads a token's SHA-256 written in hex (sha256sum's output,
// 64 digits).
func ParseDigest(s string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != sha256.Size {
		return d, errors.New("want the token's SHA-256 as 64 hex digits (printf %s TOKEN | sha256sum)")
	}
	copy(d[:], b)
	return d, nil
}

// Proxy is an authenticating proxy trusted to name the user: requests
// from Sources carry the user's name in UserHeader and their role in
// RoleHeader (or, when RoleHeader is empty or absent from a request,
// DefaultRole).
type Proxy struct {
	UserHeader  string
	RoleHeader  string
	DefaultRole Role
	Sources     []netip.Prefix
}

// Identity is who a request comes from.
type Identity struct {
	Name string
	Role Role
	// Source is the client's address: the request's remote address
	// without its port.
	Source string
	// Proxied says a proxy named the user (it signs in and out there,
	// not in the console).
	Proxied bool
}

// RecordedBy is who a pause or resume records with the sink: the
// identity's name, with the "by" the request gives beside it when that
// names someone else (a tool acting for a person), so free text never
// hides who authenticated. Anonymous's is by, else unnamed.
func (id Identity) RecordedBy(by, unnamed string) string {
	switch {
	case id.Name == Anonymous && by == "":
		return unnamed
	case id.Name == Anonymous, by == "" || by == id.Name:
		return cmp.Or(by, id.Name)
	}
	return by + " (" + id.Name + ")"
}

// Anonymous is the name of the identity of every request when no token
// and no proxy are configured (a loopback listen): it may do everything.
const Anonymous = "anonymous"

// Authenticator recognises the configured tokens and proxy.
type Authenticator struct {
	tokens []Token
	proxy  *Proxy
}

// New returns the Authenticator of tokens and proxy (nil for none). The
// configuration has checked that names and digests are unique.
func New(tokens []Token, proxy *Proxy) *Authenticator {
	return &Authenticator{tokens: slices.Clone(tokens), proxy: proxy}
}

// Open reports whether nothing is configured: every request is
// Anonymous's, with RoleAdmin.
func (a *Authenticator) Open() bool { return len(a.tokens) == 0 && a.proxy == nil }

// ErrUnauthenticated is the error of a request without a valid token (and
// not from a trusted proxy naming a user).
var ErrUnauthenticated = errors.New("missing or wrong bearer token")

// Authenticate returns who r comes from: the proxy's user (from a trusted
// source, with the user header set), else the token of its
// "Authorization: Bearer" header. With nothing configured it is
// Anonymous, an admin.
func (a *Authenticator) Authenticate(r *http.Request) (Identity, error) {
	source := ClientHost(r)
	if a.Open() {
		return Identity{Name: Anonymous, Role: RoleAdmin, Source: source}, nil
	}
	if id, ok, err := a.FromProxy(r); ok || err != nil {
		return id, err
	}
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	t, ok := a.Match(given)
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	return Identity{Name: t.Name, Role: t.Role, Source: source}, nil
}

// Match returns the token whose value is given. Every token is compared,
// each in constant time on the SHA-256 of the values, so that neither
// which token matched nor the length of any leaks through timing.
func (a *Authenticator) Match(given string) (Token, bool) {
	got := sha256.Sum256([]byte(given))
	found := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(a.tokens[i].SHA256[:], got[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Token{}, false
	}
	return a.tokens[found], true
}

// Fingerprint is a SHA-256 over every token's SHA-256: the same on every
// process with the same tokens, and known only to those that have them
// (nil without tokens). The console keys the CSRF tokens of its sign-in
// form with it, so a form served by one pod can be posted to another.
func (a *Authenticator) Fingerprint() []byte {
	if len(a.tokens) == 0 {
		return nil
	}
	h := sha256.New()
	for _, t := range a.tokens {
		h.Write(t.SHA256[:])
	}
	return h.Sum(nil)
}

// Named returns the token called name.
func (a *Authenticator) Named(name string) (Token, bool) {
	i := slices.IndexFunc(a.tokens, func(t Token) bool { return t.Name == name })
	if i < 0 {
		return Token{}, false
	}
	return a.tokens[i], true
}

// FromProxy returns the user a trusted proxy names in r: ok is false when
// no proxy is configured, r does not come from one of its sources (its
// headers are then ignored, whatever they say) or carries no user header.
// A role header naming no role is an error.
func (a *Authenticator) FromProxy(r *http.Request) (Identity, bool, error) {
	p := a.proxy
	if p == nil {
		return Identity{}, false, nil
	}
	source := ClientHost(r)
	addr, err := netip.ParseAddr(source)
	if err != nil || !slices.ContainsFunc(p.Sources, func(s netip.Prefix) bool { return s.Contains(addr.Unmap()) }) {
		return Identity{}, false, nil
	}
	user := strings.TrimSpace(r.Header.Get(p.UserHeader))
	if user == "" {
		return Identity{}, false, nil
	}
	role := p.DefaultRole
	if p.RoleHeader != "" {
		if v := strings.TrimSpace(r.Header.Get(p.RoleHeader)); v != "" {
			if role, err = ParseRole(v); err != nil {
				return Identity{}, false, fmt.Errorf("%s: %w", p.RoleHeader, err)
			}
		}
	}
	if role == "" {
		return Identity{}, false, fmt.Errorf("%s: missing, and no default role is configured", p.RoleHeader)
	}
	return Identity{Name: user, Role: role, Source: source, Proxied: true}, true, nil
}

// ClientHost is the address r came from, without its port.
func ClientHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityOf returns the identity ctx carries.
func IdentityOf(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
