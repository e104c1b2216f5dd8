package netguard_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/sinks"
)

// TestAddressPolicyCheck: the deny list wins over everything, the allow
// list admits a network whatever its kind, link-local needs its own
// switch beside allow_private, and the zero policy is CheckPublicAddr's.
// (Mutations: skipping the deny list in Check fails the 8.8.8.8 and
// 127.0.0.1-in-both cases; letting AllowPrivate admit link-local fails the
// 169.254.169.254 case.)
func TestAddressPolicyCheck(t *testing.T) {
	t.Parallel()
	pfx := netip.MustParsePrefix
	cases := []struct {
		policy netguard.AddressPolicy
		addr   string
		ok     bool
	}{
		{netguard.AddressPolicy{}, "8.8.8.8", true},
		{netguard.AddressPolicy{}, "127.0.0.1", false},
		{netguard.AddressPolicy{Deny: []netip.Prefix{pfx("8.8.8.0/24")}}, "8.8.8.8", false},
		{netguard.AddressPolicy{Allow: []netip.Prefix{pfx("127.0.0.1/32")}}, "127.0.0.1", true},
		{netguard.AddressPolicy{Allow: []netip.Prefix{pfx("127.0.0.1/32")}}, "127.0.0.2", false},
		{netguard.AddressPolicy{Allow: []netip.Prefix{pfx("127.0.0.0/8")}, Deny: []netip.Prefix{pfx("127.0.0.1/32")}}, "127.0.0.1", false},
		{netguard.AddressPolicy{AllowPrivate: true}, "10.1.2.3", true},
		{netguard.AddressPolicy{AllowPrivate: true}, "::ffff:127.0.0.1", true},
		{netguard.AddressPolicy{AllowPrivate: true}, "169.254.169.254", false},
		{netguard.AddressPolicy{AllowPrivate: true}, "fe80::1", false},
		{netguard.AddressPolicy{AllowLinkLocal: true}, "169.254.169.254", true},
		{netguard.AddressPolicy{AllowLinkLocal: true}, "10.1.2.3", false},
	}
	for _, c := range cases {
		err := c.policy.Check(netip.MustParseAddr(c.addr))
		if (err == nil) != c.ok {
			t.Errorf("%+v: Check(%s) = %v, want allowed %v", c.policy, c.addr, err, c.ok)
		}
		if err != nil && !errors.Is(err, netguard.ErrNonPublicAddress) {
			t.Errorf("%+v: Check(%s) = %v, want ErrNonPublicAddress", c.policy, c.addr, err)
		}
	}
}

// connectProxy is an HTTP proxy that tunnels CONNECT requests and records
// each target it was asked for.
type connectProxy struct {
	*http.Server
	addr    string
	mu      sync.Mutex
	targets []string
}

func newConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{addr: ln.Addr().String()}
	p.Server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.mu.Lock()
		p.targets = append(p.targets, r.Host)
		p.mu.Unlock()
		upstream, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			_ = upstream.Close()
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(upstream, conn); _ = upstream.Close() }()
		_, _ = io.Copy(conn, upstream)
		_ = conn.Close()
	})}
	go func() { _ = p.Serve(ln) }()
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func (p *connectProxy) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// TestHTTPClientProxyChecksTheTarget: through a proxy (on loopback, the
// operator's choice, so dialled), a target the policy refuses is refused
// before the proxy is asked for it, and one it allows is reached through
// the proxy by the address checked, not the name (the proxy cannot
// resolve the name to another). (Mutation: dialling the proxy without
// checking the target in proxyDialer.DialContext fails this test: the
// loopback receiver is reached.)
func TestHTTPClientProxyChecksTheTarget(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, ok)
	u, _ := url.Parse(srv.URL)
	proxy := newConnectProxy(t)
	proxyURL, err := netguard.CheckProxyURL("http://" + proxy.addr)
	if err != nil {
		t.Fatal(err)
	}
	target := "http://localhost:" + u.Port() + "/hook"

	strict := netguard.NewHTTPClient(netguard.HTTPClientOptions{Policy: &netguard.AddressPolicy{}, Proxy: proxyURL})
	resp, err := strict.Post(target, "application/json", strings.NewReader("{}"))
	if err == nil {
		netguard.DiscardBody(resp.Body)
		t.Fatalf("a loopback target went through the proxy (%s), want refused", resp.Status)
	}
	if err := sinks.TransportError(err); !errors.Is(err, netguard.ErrNonPublicAddress) {
		t.Errorf("error %v, want ErrNonPublicAddress", err)
	}
	if n, asked := hits.Load(), proxy.asked(); n != 0 || len(asked) != 0 {
		t.Fatalf("%d requests reached the receiver, the proxy was asked for %v: want none", n, asked)
	}

	allowed := netguard.NewHTTPClient(netguard.HTTPClientOptions{Proxy: proxyURL,
		Policy: &netguard.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}})
	resp, err = allowed.Post(target, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	netguard.DiscardBody(resp.Body)
	asked := proxy.asked()
	if resp.StatusCode != http.StatusNoContent || hits.Load() != 1 || len(asked) != 1 {
		t.Fatalf("status %s, %d requests, proxy asked for %v: want 204 through the proxy once", resp.Status, hits.Load(), asked)
	}
	if host, _, _ := net.SplitHostPort(asked[0]); net.ParseIP(host) == nil {
		t.Errorf("the proxy was asked for %q, want the address checked, not the name", asked[0])
	}
}

// TestCheckProxyURL: an http proxy URL with credentials passes, other
// schemes and URLs with a path or query are refused. (Mutation: accepting
// any scheme fails the socks5 case.)
func TestCheckProxyURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"http://proxy:3128":            true,
		"http://user:pass@10.0.0.5":    true,
		"socks5://proxy:1080":          false,
		"https://proxy:3128":           false,
		"http://proxy:3128/some/path":  false,
		"http://proxy:3128/?token=abc": false,
		"proxy:3128":                   false,
	} {
		if _, err := netguard.CheckProxyURL(raw); (err == nil) != ok {
			t.Errorf("CheckProxyURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}
