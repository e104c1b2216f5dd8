package sinks

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
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

// guardDial is a net.Dialer Control function: it runs after name resolution,
// just before each connect(2), with the numeric address being dialled.
func guardDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s address %q: %v", ErrNonPublicAddress, network, address, err)
	}
	return CheckPublicAddr(ap.Addr())
}
