package config

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/internal/access"
)

// tokenNamePattern is what a token's name may hold: it is shown in the
// console and the audit trail, and written in a session cookie.
var tokenNamePattern = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// checkAccess reports what is wrong with http.tokens and
// http.trusted_proxy, and a listen beyond this host that nothing guards,
// each problem naming its key.
func (h HTTPConfig) checkAccess() []confschema.Problem {
	var problems []confschema.Problem
	add := func(key, format string, args ...any) {
		problems = append(problems, confschema.Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	if !h.Authenticates() && !access.IsLoopback(h.Listen) {
		add("http.listen", "%s is not a loopback address: set http.token (OUTBOXD_HTTP_TOKEN), http.tokens or http.trusted_proxy so /v1/* require a bearer token", h.Listen)
	}
	names := map[string]string{}
	digests := map[[sha256.Size]byte]string{}
	if h.Token != "" {
		names[access.LegacyTokenName] = "http.token"
		digests[sha256.Sum256([]byte(h.Token))] = "http.token"
	}
	for i, t := range h.Tokens {
		at := fmt.Sprintf("http.tokens[%d]", i)
		switch prev, dup := names[t.Name]; {
		case t.Name == "":
			add(at+".name", "missing: name who holds the token")
		case !tokenNamePattern.MatchString(t.Name):
			add(at+".name", "%q: want at most 64 letters, digits, '.', '_', '@' and '-'", t.Name)
		case dup:
			add(at+".name", "%q is already the name of %s", t.Name, prev)
		default:
			names[t.Name] = at
		}
		if _, err := access.ParseRole(t.Role); err != nil {
			add(at+".role", "%v", err)
		}
		var digest [sha256.Size]byte
		switch {
		case t.Token != "" && t.SHA256 != "":
			add(at, "give token or sha256, not both")
			continue
		case t.Token != "":
			digest = sha256.Sum256([]byte(t.Token))
		case t.SHA256 != "":
			var err error
			if digest, err = access.ParseDigest(string(t.SHA256)); err != nil {
				add(at+".sha256", "%v", err)
				continue
			}
		default:
			add(at, "missing: give token (or its sha256)")
			continue
		}
		if prev, dup := digests[digest]; dup {
			add(at, "the same token as %s: each holder needs a token of their own", prev)
		}
		digests[digest] = at
	}
	if p := h.TrustedProxy; p != nil {
		if strings.TrimSpace(p.UserHeader) == "" {
			add("http.trusted_proxy.user_header", "missing: name the header carrying the user, e.g. X-Forwarded-User")
		}
		if p.DefaultRole != "" {
			if _, err := access.ParseRole(p.DefaultRole); err != nil {
				add("http.trusted_proxy.default_role", "%v", err)
			}
		} else if p.RoleHeader == "" {
			add("http.trusted_proxy", "give role_header, default_role or both")
		}
		if len(p.Sources) == 0 {
			add("http.trusted_proxy.sources", "missing: list the proxy's addresses (CIDRs); requests from elsewhere are not believed")
		}
		for i, s := range p.Sources {
			if _, err := parseProxySource(s); err != nil {
				add(fmt.Sprintf("http.trusted_proxy.sources[%d]", i), "%q: want a CIDR such as 10.0.0.0/8 or an address", s)
			}
		}
	}
	return problems
}

// parseProxySource reads a CIDR or a single address.
func parseProxySource(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// Authenticates reports whether the HTTP API asks who a request comes
// from: a token or a trusted proxy is configured.
func (h HTTPConfig) Authenticates() bool {
	return h.Token != "" || len(h.Tokens) > 0 || h.TrustedProxy != nil
}

// Authenticator is the access.Authenticator of http.token, http.tokens
// and http.trusted_proxy, as checked when the configuration loaded.
func (h HTTPConfig) Authenticator() *access.Authenticator {
	var tokens []access.Token
	if h.Token != "" {
		tokens = append(tokens, access.TokenOf(access.LegacyTokenName, string(h.Token), access.RoleAdmin))
	}
	for _, t := range h.Tokens {
		role, _ := access.ParseRole(t.Role) // checked by checkAccess
		if t.Token != "" {
			tokens = append(tokens, access.TokenOf(t.Name, string(t.Token), role))
			continue
		}
		digest, _ := access.ParseDigest(string(t.SHA256))
		tokens = append(tokens, access.Token{Name: t.Name, SHA256: digest, Role: role})
	}
	var proxy *access.Proxy
	if p := h.TrustedProxy; p != nil {
		proxy = &access.Proxy{UserHeader: p.UserHeader, RoleHeader: p.RoleHeader, DefaultRole: access.Role(p.DefaultRole)}
		for _, s := range p.Sources {
			prefix, _ := parseProxySource(s)
			proxy.Sources = append(proxy.Sources, prefix)
		}
	}
	return access.New(tokens, proxy)
}
