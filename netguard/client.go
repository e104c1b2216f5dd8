package netguard

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for [NewHTTPClient].
const (
	// DefaultHTTPTimeout bounds one whole request (connect, send, read the
	// response headers and body) when HTTPClientOptions.Timeout is zero.
	DefaultHTTPTimeout = 10 * time.Second
	// DefaultDialTimeout bounds establishing one TCP connection.
	DefaultDialTimeout = 5 * time.Second
	// MaxResponseHeaderBytes bounds a response's status line and headers.
	// Receivers are third parties: Go's default of 10 MiB would let each
	// of them make every delivery buffer that much. APIs answer with a few
	// KiB of headers at most.
	MaxResponseHeaderBytes = 64 << 10
	// MaxIdleConnsPerHost is how many idle connections the client keeps
	// to one host: as many as a relay delivers at once by default
	// (relay.DefaultConcurrency), so concurrent deliveries to one
	// receiver, or to many destinations behind one host, reuse their
	// connections. Go's default of 2 made 46,943 of 54,000 deliveries to
	// tenants' endpoints on one host open a new connection (a TLS
	// handshake each, in production).
	MaxIdleConnsPerHost = 64
	// MaxIdleConns bounds the idle connections to all hosts together: a
	// sink delivering to thousands of hosts keeps the busiest warm without
	// holding a socket per host.
	MaxIdleConns = 512
	// maxDrainBytes is how much of an unread response body DiscardBody reads
	// so the connection can be reused; a larger body is cheaper to abandon
	// with its connection.
	maxDrainBytes = 64 << 10
)

// HTTPClientOptions configures [NewHTTPClient].
type HTTPClientOptions struct {
	// Timeout bounds one whole request; zero means DefaultHTTPTimeout. The
	// request's context (the relay's delivery deadline) bounds it as well.
	Timeout time.Duration
	// AllowPrivate lets the client connect to loopback, private, link-local
	// and other non-public addresses (see [CheckPublicAddr]). Leave it false
	// for any URL that comes from configuration a third party can influence;
	// set it for test servers and proxies on the local network. It also
	// decides whether the environment's HTTP(S)_PROXY is honoured: a proxy
	// makes the connection on our behalf, out of the guard's sight.
	AllowPrivate bool
	// TracerProvider records each request as a client span, a child of the
	// span in the request's context (the relay's delivery span). Nil means
	// the global provider.
	TracerProvider trace.TracerProvider
	// TraceURLPath lets the client span record the request URL's path. By
	// default the path is recorded as /REDACTED, because a webhook URL's
	// path may be its credential; set it for APIs whose paths are method
	// names. Query values are always redacted (see [RedactURL]).
	TraceURLPath bool
	// Policy, when set, decides which addresses the client connects to
	// instead of AllowPrivate (see [AddressPolicy]); the environment's
	// HTTP(S)_PROXY is then never honoured.
	Policy *AddressPolicy
	// Proxy, when set, is an HTTP proxy every request goes through, by
	// CONNECT to the target's address, which the guard (Policy, or
	// AllowPrivate's) checks first: the proxy is dialled, the policy
	// still applies to the target. See [CheckProxyURL].
	Proxy *url.URL
	// ClientCertificate, when set, is presented to servers that ask for
	// a client certificate (mutual TLS). A client with one has a
	// transport of its own, so its connections carry no one else's
	// requests.
	ClientCertificate *tls.Certificate
}

// NewHTTPClient returns the HTTP client every HTTP sink should use:
//
//   - its requests are traced with otelhttp, so they show up as child spans
//     of the delivery, and carry the trace context to the receiver in the
//     format of the global propagator the application installed;
//   - redirects are not followed: the caller sees the 3xx response itself
//     (a redirect could lead a signed request somewhere it was not meant to
//     go, past the address guard's intent);
//   - spans record the URL redacted (see [RedactURL] and TraceURLPath):
//     otelhttp would otherwise put the full URL, credential and all, in
//     the url.full attribute;
//   - a response's headers may take at most MaxResponseHeaderBytes;
//   - it keeps up to MaxIdleConnsPerHost idle connections per host, so
//     concurrent deliveries to one host reuse them;
//   - unless AllowPrivate, it refuses to connect to non-public addresses
//     (or to what Policy refuses, through Proxy when set).
//     The check runs in the dialer on the IP address actually being dialled,
//     after name resolution, so a hostname that resolves (or is re-bound) to
//     127.0.0.1 is refused just like the literal address.
func NewHTTPClient(opts HTTPClientOptions) *http.Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultHTTPTimeout
	}
	dialer := &net.Dialer{Timeout: DefaultDialTimeout}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.DialContext = dialer.DialContext
	base.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	base.MaxIdleConns, base.MaxIdleConnsPerHost = MaxIdleConns, MaxIdleConnsPerHost
	if opts.ClientCertificate != nil {
		base.TLSClientConfig = &tls.Config{Certificates: []tls.Certificate{*opts.ClientCertificate}, MinVersion: tls.VersionTLS12}
	}
	policy := opts.Policy
	if policy == nil && !opts.AllowPrivate {
		policy = &AddressPolicy{} // public addresses only
	}
	switch {
	case opts.Proxy != nil:
		if policy == nil {
			policy = &AddressPolicy{AllowPrivate: true, AllowLinkLocal: true}
		}
		base.DialContext = (&proxyDialer{policy: policy, proxy: opts.Proxy, dialer: dialer, resolver: net.DefaultResolver}).DialContext
		base.Proxy = nil
	case policy != nil:
		dialer.Control = policy.control
		base.Proxy = nil
	}
	var otelOpts []otelhttp.Option
	if opts.TracerProvider != nil {
		otelOpts = append(otelOpts, otelhttp.WithTracerProvider(opts.TracerProvider))
	}
	return &http.Client{
		Transport: redactURLTransport{
			next:     otelhttp.NewTransport(restoreURLTransport{next: base}, otelOpts...),
			keepPath: opts.TraceURLPath,
		},
		Timeout: opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// DiscardBody reads what is left of a response body, up to a bound, and
// closes it, so the connection can carry the next request. Call it (usually
// deferred) on every response a sink does not read to the end.
func DiscardBody(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrainBytes))
	_ = body.Close()
}
