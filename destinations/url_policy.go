package destinations

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"time"
)

// URL checks at the door: a Store given the network policy (WithNetwork)
// refuses a destination URL the policy would refuse at connect time when
// it is created, when its url is changed and when a test event is sent
// to it, so a tenant hears of it at once, as a 422 naming url, instead of
// from a dead delivery. Deliveries still check each address they dial: a
// name may resolve elsewhere later (or to several addresses), and only
// the dial sees the address actually used.

// URLResolveTimeout bounds the name resolution of a destination's host
// when its URL is checked at the door: a resolver that does not answer
// within it leaves the check to the deliveries rather than hold the
// tenant's request.
const URLResolveTimeout = 2 * time.Second

// errURLRefused is the refusal of a destination URL whose host is, or
// resolves to, an address the policy refuses. It names neither the
// address nor its kind: what a host name resolves to inside the
// producer's network is not for a tenant to learn.
const errURLRefused = "url: its host is, or resolves to, an address the network policy refuses (loopback, private, link-local or denied)"

// WithNetwork returns a Store like s that checks destination URLs
// against n, the one network policy of destinations (NetworkConfig), when
// a destination is created, when its url is changed and when a test
// event is sent to it: a scheme or port n does not allow, or a host that
// is or resolves to an address it refuses, is refused with an
// *InputError naming url. A Store without one (NewStore, or n nil) leaves
// the URL to the deliveries' check at connect time.
func (s *Store) WithNetwork(n *Network) *Store {
	d := *s.door.Load()
	d.network = n
	return s.withDoor(d)
}

// checkURL is the door's check of raw under the Store's policy, if any.
func (s *Store) checkURL(ctx context.Context, raw string) error {
	n := s.door.Load().network
	if n == nil {
		return nil
	}
	return n.CheckDestinationURL(ctx, raw)
}

// CheckDestinationURL reports, as an *InputError naming url, whether n
// refuses a destination at raw: its scheme or port (CheckURL), or its
// host, an address n refuses or a name resolving to one. A name that
// does not resolve (yet), or whose resolution outlasts
// URLResolveTimeout, passes: the deliveries check the addresses they
// dial. Its errors never repeat the URL or an address it resolved to.
func (n *Network) CheckDestinationURL(ctx context.Context, raw string) error {
	if err := n.CheckURL(raw); err != nil {
		return inputErrorf("url: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return inputErrorf("url: it does not parse")
	}
	for _, addr := range resolve(ctx, u.Hostname()) {
		if n.policy.Check(addr) != nil {
			return inputErrorf(errURLRefused)
		}
	}
	return nil
}

// resolve returns the addresses of host: itself when it is an address,
// else what the resolver answers within URLResolveTimeout (none when it
// does not).
func resolve(ctx context.Context, host string) []netip.Addr {
	if addr, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{addr}
	}
	ctx, cancel := context.WithTimeout(ctx, URLResolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	return addrs
}
