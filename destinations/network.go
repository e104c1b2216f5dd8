package destinations

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outboxd/netguard"
	"go.opentelemetry.io/otel/trace"
)

// DefaultSchemes are the URL schemes a destination may use unless
// destinations.network.schemes says otherwise.
var DefaultSchemes = []string{"https", "http"}

// NetworkConfig is the network policy of every destination, the
// destinations.network block of plugins.yaml: declared once, it decides
// what deliveries, breaker probes and test events (from the console, the
// portal and the API alike) may connect to, because a tenant chooses its
// endpoints' URLs and must not reach into the producer's network with
// them. The zero value with DefaultSchemes is the default: public
// addresses only, any port, no proxy.
type NetworkConfig struct {
	Schemes []string `mapstructure:"schemes" defaultdoc:"https, http" doc:"the URL schemes a destination may use (http, https)"`
	Ports   []int    `mapstructure:"ports" defaultdoc:"any" doc:"the ports a destination's URL may name; empty allows any"`
	// AllowPrivate and AllowLinkLocal open the ranges refused by default.
	AllowPrivate   bool `mapstructure:"allow_private" doc:"let destinations reach loopback, private (RFC 1918, unique-local) and the other non-public ranges except link-local, refused by default"`
	AllowLinkLocal bool `mapstructure:"allow_link_local" doc:"let destinations reach link-local addresses (169.254.0.0/16, where clouds serve instance credentials, and fe80::/10), refused by default even with allow_private"`
	// Allow and Deny are networks as CIDRs or single addresses.
	Allow []string `mapstructure:"allow" doc:"networks (CIDRs or addresses) destinations may reach whatever their kind, e.g. one internal range of test endpoints"`
	Deny  []string `mapstructure:"deny" doc:"networks destinations may never reach, public or not; the deny list wins over the allow list and both switches"`
	Proxy string   `mapstructure:"proxy" defaultdoc:"none" doc:"an HTTP proxy every delivery goes through (http://[user:password@]host:port, as HTTPS_PROXY; write ${HTTPS_PROXY} to take the environment's): asked to CONNECT to the address the policy checked, so the policy still applies to the target; the proxy's own address is not checked"`
}

// DefaultNetworkConfig is the network policy when plugins.yaml declares
// none: public addresses only, by http or https, on any port.
func DefaultNetworkConfig() NetworkConfig {
	return NetworkConfig{Schemes: slices.Clone(DefaultSchemes)}
}

// Network is a checked NetworkConfig, ready to deliver with. It is safe
// for concurrent use.
type Network struct {
	schemes []string
	ports   []int
	policy  netguard.AddressPolicy
	proxy   *url.URL
}

// Network checks c and returns the policy it declares; each error names
// its key below destinations.network.
func (c NetworkConfig) Network() (*Network, error) {
	if c.Schemes == nil {
		c.Schemes = DefaultSchemes // a block that does not list them
	}
	n := &Network{schemes: c.Schemes, ports: c.Ports,
		policy: netguard.AddressPolicy{AllowPrivate: c.AllowPrivate, AllowLinkLocal: c.AllowLinkLocal}}
	var errs []error
	if len(c.Schemes) == 0 {
		errs = append(errs, errors.New("schemes: list at least one (https)"))
	}
	for i, s := range c.Schemes {
		if s != "http" && s != "https" {
			errs = append(errs, fmt.Errorf("schemes[%d]: %q is not http or https", i, s))
		}
	}
	for i, p := range c.Ports {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("ports[%d]: %d is not a port", i, p))
		}
	}
	var err error
	n.policy.Allow, err = prefixes("allow", c.Allow)
	errs = append(errs, err)
	n.policy.Deny, err = prefixes("deny", c.Deny)
	errs = append(errs, err)
	if c.Proxy != "" {
		if n.proxy, err = netguard.CheckProxyURL(c.Proxy); err != nil {
			errs = append(errs, fmt.Errorf("proxy: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return n, nil
}

// prefixes parses the networks of list key, CIDRs or single addresses.
func prefixes(key string, list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%s[%d]: %q is neither a CIDR (10.0.0.0/8) nor an address", key, i, s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// CheckURL reports whether raw's scheme and port are ones the policy
// allows; its errors never repeat the URL. The addresses are checked when
// a delivery connects.
func (n *Network) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("its url does not parse")
	}
	if !slices.Contains(n.schemes, u.Scheme) {
		return fmt.Errorf("its url's scheme %q is not allowed by the network policy (%s)", u.Scheme, strings.Join(n.schemes, ", "))
	}
	if len(n.ports) == 0 {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, _ := strconv.Atoi(port)
	if !slices.Contains(n.ports, p) {
		return fmt.Errorf("its url's port %s is not allowed by the network policy", port)
	}
	return nil
}

// HTTPClient is the client that delivers under the policy: it connects
// only to addresses the policy allows (checked at connect time, after
// name resolution), through the proxy when one is set, each request
// bounded by timeout and traced with tp (nil: the global provider).
func (n *Network) HTTPClient(timeout time.Duration, tp trace.TracerProvider) *http.Client {
	return n.httpClient(timeout, tp, nil)
}

// Strictest returns the policy that allows only what every one of cs
// allows: the schemes they share, the ports they share (a config without
// ports allows any), the private and link-local ranges only if all open
// them, the allow lists' common networks, every deny list's. It is how
// the deprecated options allow_private, schemes and ports of several
// sinks of type destinations become the one policy. Configs sharing no
// scheme, or no port, are an error.
func Strictest(cs ...NetworkConfig) (NetworkConfig, error) {
	if len(cs) == 0 {
		return DefaultNetworkConfig(), nil
	}
	out := cs[0]
	out.Schemes, out.Ports = slices.Clone(out.Schemes), slices.Clone(out.Ports)
	out.Allow, out.Deny = slices.Clone(out.Allow), slices.Clone(out.Deny)
	for _, c := range cs[1:] {
		out.Schemes = slices.DeleteFunc(out.Schemes, func(s string) bool { return !slices.Contains(c.Schemes, s) })
		if len(out.Schemes) == 0 {
			return NetworkConfig{}, errors.New("their schemes have none in common")
		}
		switch {
		case len(out.Ports) == 0:
			out.Ports = slices.Clone(c.Ports)
		case len(c.Ports) > 0:
			out.Ports = slices.DeleteFunc(out.Ports, func(p int) bool { return !slices.Contains(c.Ports, p) })
			if len(out.Ports) == 0 {
				return NetworkConfig{}, errors.New("their ports have none in common")
			}
		}
		out.AllowPrivate = out.AllowPrivate && c.AllowPrivate
		out.AllowLinkLocal = out.AllowLinkLocal && c.AllowLinkLocal
		out.Allow = slices.DeleteFunc(out.Allow, func(s string) bool { return !slices.Contains(c.Allow, s) })
		for _, d := range c.Deny {
			if !slices.Contains(out.Deny, d) {
				out.Deny = append(out.Deny, d)
			}
		}
	}
	return out, nil
}

// NetworkUser is a sink that delivers to destinations, as the
// configuration sees it: the network options it was given itself (the
// deprecated aliases of destinations.network) and whether any differs
// from the default, how it is handed the one policy every destination
// has, and the policy it holds.
type NetworkUser interface {
	NetworkOptions() (NetworkConfig, bool)
	UseNetwork(*Network)
	Network() *Network
}
