package netguard

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// ErrNonPublicAddress is wrapped by the error of a connection that
// [NewHTTPClient] refused because its address is not a public unicast one.
var ErrNonPublicAddress = errors.New("address is not public")

// nonPublicPrefixes are the ranges the standard library's netip predicates
// do not cover but that still reach something other than the public
// internet. Each is named for the error message.
var nonPublicPrefixes = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},          // RFC 791; 0.x can reach the local host on Linux
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"}, // RFC 6598, the provider's internal network
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},      // RFC 6890
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},      // RFC 2544
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},            // RFC 1112, includes broadcast
	{netip.MustParsePrefix("fec0::/10"), "site-local"},            // RFC 3879, deprecated but routable in old networks
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},  // RFC 8215
	// IPv6 ranges that carry an IPv4 address, or reach one through a
	// relay, which could be a private one: the guard cannot follow them.
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"}, // RFC 4291, deprecated
	{netip.MustParsePrefix("2002::/16"), "6to4"},        // RFC 3056
	{netip.MustParsePrefix("2001::/32"), "Teredo"},      // RFC 4380
	{netip.MustParsePrefix("100::/64"), "discard-only"}, // RFC 6666
}

// nat64 is the well-known NAT64 prefix: its last 32 bits are an IPv4
// address that a NAT64 gateway connects to, so they are checked like one.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// CheckPublicAddr returns nil when addr is a public unicast address, and an
// error wrapping [ErrNonPublicAddress] that says which kind it is otherwise:
// loopback, private (RFC 1918, unique-local), link-local (including the
// cloud metadata address 169.254.169.254), unspecified, multicast,
// carrier-grade NAT, the IPv6 ranges that embed or relay to IPv4 (6to4,
// Teredo, IPv4-compatible) and other special-purpose ranges. IPv4 addresses
// written in IPv6 form (::ffff:127.0.0.1, 64:ff9b::7f00:1) are judged by the
// IPv4 address inside.
func CheckPublicAddr(addr netip.Addr) error {
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	var what string
	switch {
	case !addr.IsValid():
		what = "invalid"
	case addr.IsLoopback():
		what = "loopback"
	case addr.IsPrivate():
		what = "private"
	case addr.IsUnspecified():
		what = "unspecified"
	case addr.IsLinkLocalUnicast():
		what = "link-local"
	case addr.IsMulticast():
		what = "multicast"
	default:
		for _, p := range nonPublicPrefixes {
			if p.prefix.Contains(addr) {
				what = p.what
				break
			}
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: %s is %s (set allow_private to connect to it)", ErrNonPublicAddress, addr, what)
}

// AddressPolicy decides which addresses a client built by [NewHTTPClient]
// may connect to, for URLs a third party chooses (a tenant's endpoint).
// The zero policy is [CheckPublicAddr]'s: public unicast addresses only.
type AddressPolicy struct {
	// AllowPrivate lets the client reach loopback, private (RFC 1918,
	// unique-local) and the other non-public ranges CheckPublicAddr
	// names, except link-local ones.
	AllowPrivate bool
	// AllowLinkLocal lets it reach link-local addresses (169.254.0.0/16,
	// fe80::/10), where clouds serve their metadata and credentials.
	AllowLinkLocal bool
	// Allow are networks it may reach whatever their kind.
	Allow []netip.Prefix
	// Deny are networks it may never reach, public or not: they win over
	// Allow and both switches.
	Deny []netip.Prefix
}

// Check returns nil when p lets a client connect to addr, and otherwise
// an error wrapping [ErrNonPublicAddress] that says why. IPv4 addresses
// written in IPv6 form are judged by the IPv4 address inside.
func (p *AddressPolicy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, n := range p.Deny {
		if n.Contains(addr) {
			return fmt.Errorf("%w: %s is in the deny list (%s)", ErrNonPublicAddress, addr, n)
		}
	}
	for _, n := range p.Allow {
		if n.Contains(addr) {
			return nil
		}
	}
	err := CheckPublicAddr(addr)
	if err == nil {
		return nil
	}
	inner := addr
	if nat64.Contains(addr) {
		b := addr.As16()
		inner = netip.AddrFrom4([4]byte(b[12:]))
	}
	if inner.IsLinkLocalUnicast() {
		if p.AllowLinkLocal {
			return nil
		}
		return fmt.Errorf("%w: %s is link-local (the network policy refuses it; allow_link_local admits it)", ErrNonPublicAddress, addr)
	}
	if p.AllowPrivate && inner.IsValid() {
		return nil
	}
	return err
}

// control is p as a net.Dialer Control function: it runs after name
// resolution, just before each connect(2), with the numeric address being
// dialled.
func (p *AddressPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s address %q: %v", ErrNonPublicAddress, network, address, err)
	}
	return p.Check(ap.Addr())
}

// proxyDialer connects through an HTTP proxy with CONNECT, the way
// HTTPS_PROXY is used, but checks the target against the policy first:
// it resolves the target's name itself, picks the first address the
// policy allows, and asks the proxy for that address, so the proxy cannot
// resolve the name to another (DNS rebinding). The proxy's own address is
// the operator's choice and is not checked.
type proxyDialer struct {
	policy   *AddressPolicy
	proxy    *url.URL
	dialer   *net.Dialer
	resolver *net.Resolver
}

// DialContext dials addr (host:port) through the proxy.
func (d *proxyDialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: target %q: %w", addr, err)
	}
	ips, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var target netip.Addr
	var refused error
	for _, ip := range ips {
		if refused = d.policy.Check(ip); refused == nil {
			target = ip
			break
		}
	}
	if !target.IsValid() {
		return nil, refused
	}
	conn, err := d.dialer.DialContext(ctx, "tcp", proxyHostPort(d.proxy))
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if err := d.connect(ctx, conn, net.JoinHostPort(target.String(), port)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// connect asks the proxy on conn for a tunnel to hostport.
func (d *proxyDialer) connect(ctx context.Context, conn net.Conn, hostport string) error {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
		defer func() { _ = conn.SetDeadline(time.Time{}) }()
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: hostport}, Host: hostport, Header: http.Header{}}
	if u := d.proxy.User; u != nil {
		pass, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pass)))
	}
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("proxy: send CONNECT: %w", err)
	}
	// The client speaks first on a tunnel (TLS's hello, an HTTP request),
	// so nothing follows the proxy's answer that this reader could keep.
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Errorf("proxy: read its answer to CONNECT: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy: CONNECT answered %s", resp.Status)
	}
	return nil
}

// proxyHostPort is the proxy's host:port, its scheme's port when the URL
// names none.
func proxyHostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// CheckProxyURL reports whether raw is a proxy [HTTPClientOptions] can
// use: http://[user:password@]host[:port], with nothing else.
func CheckProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, errors.New("want http://[user:password@]host[:port] (the proxy is spoken to with CONNECT)")
	}
	return u, nil
}
