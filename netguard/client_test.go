package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/sinks"
)

// TestCheckPublicAddr: public unicast addresses pass, every non-public
// range (IPv4, IPv6 and the IPv6 forms of IPv4) is refused. (Mutations:
// dropping 2002::/16 from nonPublicPrefixes fails this test; so does
// CheckPublicAddr not unmapping ::ffff:a.b.c.d, at ::ffff:100.64.0.1.)
func TestCheckPublicAddr(t *testing.T) {
	t.Parallel()
	refused := []string{
		"127.0.0.1", "127.8.9.10", "::1", // loopback
		"10.1.2.3", "172.16.0.1", "192.168.1.1", "fd00::1", // private
		"169.254.169.254", "fe80::1", // link-local, cloud metadata
		"0.0.0.0", "::", "0.1.2.3", // unspecified, this-network
		"224.0.0.1", "ff02::1", // multicast
		"100.64.0.1", "100.127.255.254", // carrier-grade NAT
		"198.18.0.1", "192.0.0.8", "255.255.255.255", "fec0::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", // IPv4-mapped
		"::ffff:100.64.0.1", "::ffff:198.18.0.1", // IPv4-mapped, ranges netip's predicates do not know
		"64:ff9b::7f00:1", "64:ff9b::a00:1", // NAT64 of 127.0.0.1 and 10.0.0.1
		"::a00:1", "::808:808", // IPv4-compatible, whatever the IPv4 address
		"2002:7f00:1::1", "2002:808:808::1", // 6to4
		"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1", // Teredo
		"100::1", "100::ffff:ffff:ffff:ffff", // discard-only
	}
	for _, s := range refused {
		err := netguard.CheckPublicAddr(netip.MustParseAddr(s))
		if !errors.Is(err, netguard.ErrNonPublicAddress) {
			t.Errorf("CheckPublicAddr(%s) = %v, want ErrNonPublicAddress", s, err)
		}
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808",
		"2001:1::1", "2003::1", "100:0:0:1::1"}
	for _, s := range allowed {
		if err := netguard.CheckPublicAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckPublicAddr(%s) = %v, want nil", s, err)
		}
	}
}

// countingServer is an httptest server that counts the requests reaching it.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// TestHTTPClientRefusesNonPublic dials the loopback test server by literal
// address and by a hostname that resolves to it: both are refused at dial
// time, so no request reaches the server, and the outcome is permanent.
// (Mutation: NewHTTPClient not installing guardDial fails this test.)
func TestHTTPClientRefusesNonPublic(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, ok)
	u, _ := url.Parse(srv.URL)
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{})
	for _, host := range []string{"127.0.0.1", "localhost", "[::ffff:127.0.0.1]"} {
		target := "http://" + host + ":" + u.Port() + "/hook?token=s3cret"
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, target, nil)
		resp, err := client.Do(req)
		if err == nil {
			netguard.DiscardBody(resp.Body)
			t.Fatalf("%s: request went through (%s), want refused", host, resp.Status)
		}
		err = sinks.TransportError(err)
		if !errors.Is(err, netguard.ErrNonPublicAddress) || !sink.IsPermanent(err) {
			t.Errorf("%s: error %v, want a permanent ErrNonPublicAddress", host, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error %q leaks the URL's token", host, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the loopback server", n)
	}
}

func TestHTTPClientAllowPrivate(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, ok)
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true})
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	netguard.DiscardBody(resp.Body)
	if resp.StatusCode != http.StatusNoContent || hits.Load() != 1 {
		t.Fatalf("status %s after %d requests, want 204 after 1", resp.Status, hits.Load())
	}
}

// TestHTTPClientBoundsResponseHeaders: a receiver answering with more than
// MaxResponseHeaderBytes of headers fails the request (a retryable error)
// instead of having every delivery buffer them; ordinary headers pass.
// (Mutation: the transport without MaxResponseHeaderBytes fails this test.)
func TestHTTPClientBoundsResponseHeaders(t *testing.T) {
	t.Parallel()
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("p", len(r.URL.Query().Get("pad"))))
		w.WriteHeader(http.StatusNoContent)
	})
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true})
	for _, size := range []int{4 << 10, netguard.MaxResponseHeaderBytes + 1} {
		resp, err := client.Get(srv.URL + "/?pad=" + strings.Repeat("x", size))
		if err == nil {
			netguard.DiscardBody(resp.Body)
		}
		switch tooLarge := size > netguard.MaxResponseHeaderBytes; {
		case tooLarge && err == nil:
			t.Errorf("%d bytes of response headers were accepted", size)
		case tooLarge && sink.IsPermanent(sinks.TransportError(err)):
			t.Errorf("oversized headers are a permanent failure: %v", err)
		case !tooLarge && err != nil:
			t.Errorf("%d bytes of response headers: %v", size, err)
		}
	}
}

func TestHTTPClientDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	target, targetHits := countingServer(t, ok)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	})
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true})
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer netguard.DiscardBody(resp.Body)
	if resp.StatusCode != http.StatusFound {
		t.Errorf("status %s, want the 302 itself", resp.Status)
	}
	if !sink.IsPermanent(sinks.ClassifyResponse(resp)) {
		t.Errorf("a 302 is not classified as permanent")
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

// TestHTTPClientSpans checks that each request is a client span, child of
// the span in the request's context.
func TestHTTPClientSpans(t *testing.T) {
	t.Parallel()
	srv, _ := countingServer(t, ok)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true, TracerProvider: tp})

	ctx, parent := tp.Tracer("test").Start(context.Background(), "deliver")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	netguard.DiscardBody(resp.Body)
	parent.End()

	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.SpanKind() == trace.SpanKindClient {
			return
		}
	}
	t.Fatalf("no client span that is a child of the delivery span among %d spans", len(rec.Ended()))
}

// TestHTTPClientReusesConnectionsToOneHost: 32 requests at a time to one
// receiver, 20 rounds, open about 32 connections, not one per request
// beyond Go's two idle ones. (Mutation: leaving MaxIdleConnsPerHost at
// Go's default fails this test: 590 new connections for 640 requests.)
func TestHTTPClientReusesConnectionsToOneHost(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true})
	const inFlight, rounds = 32, 20
	for range rounds {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				netguard.DiscardBody(resp.Body)
			})
		}
		wg.Wait()
	}
	if n := opened.Load(); n > 2*inFlight {
		t.Errorf("%d requests, %d at a time, opened %d connections; want at most %d", inFlight*rounds, inFlight, n, 2*inFlight)
	}
}
