package destinations

import (
	"encoding/json"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"github.com/outboxd/outboxd/netguard"
)

// Redacted replaces a credential in a destination's URL as shown.
const Redacted = "REDACTED"

// credentialWords mark a query parameter whose value is a credential:
// token=, api_key=, secret=, sig=, password=, auth=...
var credentialWords = []string{"token", "key", "secret", "sig", "pass", "auth", "credential", "session"}

// RedactURL returns raw as every reader sees it: user info (user:pass@)
// replaced by REDACTED, and the value of every query parameter whose
// name holds a credential word (token, key, secret, sig, pass, auth,
// credential, session) replaced by REDACTED; the scheme, host, path and
// other parameters stay, so an operator can still tell endpoints apart.
// A URL that does not parse is shown as REDACTED whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			name := strings.ToLower(k)
			for _, w := range credentialWords {
				if strings.Contains(name, w) {
					q[k] = []string{Redacted}
					break
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// What TenantError rewrites.
var (
	// sinkPrefix is a sink's name before its error: destinations "customers": .
	sinkPrefix = regexp.MustCompile(`\b[a-z][a-z0-9_-]* "[^"]*": `)
	// resolver is the name server a failed lookup names: lookup host on 10.0.0.53:53.
	resolver = regexp.MustCompile(`(lookup \S+) on \S+:`)
	// refused is a connection the network policy refused, with the address.
	refused = regexp.MustCompile(`dial \S+( \S+)?: ` + regexp.QuoteMeta(netguard.ErrNonPublicAddress.Error()) + `: .*`)
	// addressLike is a token that may be an IP address, with a port or in
	// brackets.
	addressLike = regexp.MustCompile(`[0-9A-Fa-f:.\[\]%]*[.:][0-9A-Fa-f:.\[\]%]*`)
)

// PolicyRefusal is what a tenant reads of a delivery the network policy
// refused: not which address, nor why it is not allowed.
const PolicyRefusal = "the endpoint's address is not one outboxd may connect to (refused by the network policy)"

// internalAddress stands for an address a tenant may not read.
const internalAddress = "[internal address]"

// TenantError returns a delivery error as a tenant may read it: without
// the names of sinks or routes, the resolver's address, the address the
// network policy refused or any other non-public address (operators
// read the full text in the console and the message lookups).
func TenantError(text string) string {
	text = sinkPrefix.ReplaceAllString(text, "")
	text = resolver.ReplaceAllString(text, "$1:")
	text = refused.ReplaceAllString(text, PolicyRefusal)
	return addressLike.ReplaceAllStringFunc(text, func(tok string) string {
		trimmed := strings.TrimRight(tok, ":.")
		addr, err := netip.ParseAddr(trimmed)
		if err != nil {
			ap, perr := netip.ParseAddrPort(trimmed)
			if perr != nil {
				return tok
			}
			addr = ap.Addr()
		}
		if netguard.CheckPublicAddr(addr) == nil {
			return tok
		}
		return internalAddress + tok[len(trimmed):]
	})
}

// ForTenant returns deliveries as their tenant may see them (the portal,
// and the API's answers about one tenant's destination): every error
// through TenantError, no sink name, no address an attempt went to
// (the operator's to read: an internal address must not reach a tenant),
// and an event's dedup key without the route it was published by.
func ForTenant(deliveries []Delivery) []Delivery {
	out := make([]Delivery, len(deliveries))
	for i, d := range deliveries {
		d.Sink = ""
		d.LastError = TenantError(d.LastError)
		d.DedupKey = withoutRoute(d.DedupKey)
		if d.LastAttempt != nil {
			last := *d.LastAttempt
			last.RemoteAddr = ""
			d.LastAttempt = &last
		}
		var attempts []map[string]any
		if json.Unmarshal(d.FailedAttempts, &attempts) == nil {
			for _, a := range attempts {
				if e, ok := a["error"].(string); ok {
					a["error"] = TenantError(e)
				}
				if details, ok := a["details"].(map[string]any); ok {
					delete(details, "remote_addr")
				}
			}
			if b, err := json.Marshal(attempts); err == nil {
				d.FailedAttempts = b
			}
		}
		out[i] = d
	}
	return out
}

// withoutRoute drops the route from a published event's dedup key,
// <type>/<key>/<route>/<destination id> (publish's fan-out, migration
// 016), leaving <type>/<key>; other keys are the producer's own.
func withoutRoute(key string) string {
	parts := strings.Split(key, "/")
	if n := len(parts); n >= 4 && strings.HasPrefix(parts[n-1], IDPrefix) {
		return strings.Join(parts[:n-2], "/")
	}
	return key
}
