package access

import (
	"net"
	"net/netip"
)

// IsLoopback reports whether listen, a host:port, is a loopback address:
// an API listening there is reachable from this host only, so it may run
// without tokens (config check and serve refuse any other listen without
// them).
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	return err == nil && IsLoopbackHost(host)
}

// IsLoopbackHost reports whether host is localhost or a loopback address.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
