package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/webhook"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2Vjb25kLXNlY3JldC1mb3ItdGhlLXJvdGF0aW9u" // "second-secret-for-the-rotation"
	secretC = "whsec_dGhpcmQtc2VjcmV0LW5ldmVyLWNvbmZpZ3VyZWQ="
)

// request is what the receiver saw of one request.
type request struct {
	method string
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint on httptest that records every request and
// answers with respond.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []request
}

func newReceiver(t testing.TB, respond http.HandlerFunc) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, request{method: r.Method, header: r.Header.Clone(), body: body})
		rc.mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// take returns the requests received since the last call, and forgets them.
func (rc *receiver) take() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	reqs := rc.reqs
	rc.reqs = nil
	return reqs
}

func accept(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// build makes a webhook sink from options, as plugins.yaml would.
func build(t testing.TB, options map[string]any) sink.Sink {
	t.Helper()
	s, err := webhook.Type.New("hook", options, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func delivery(key, payload string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "hook", DedupKey: key, Payload: json.RawMessage(payload), Attempt: 1}
}

// kind says which class of outcome err is, for the relay.
func kind(err error) string {
	if _, ok := sink.RetryAfterDelay(err); ok {
		return "retry-after"
	}
	if sink.IsPermanent(err) {
		return "permanent"
	}
	if err != nil {
		return "retry"
	}
	return "sent"
}

func TestDeliverSendsSignedPayload(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, accept)
	s := build(t, map[string]any{
		"url":           rc.URL + "/hooks/orders",
		"secret":        secretA,
		"headers":       map[string]any{"X-Tenant": "acme"},
		"allow_private": true,
	})
	payload := `{"order": 42,  "note": "spacing and key order kept", "a": [1,2]}`
	if err := s.Deliver(t.Context(), delivery("order-42", payload)); err != nil {
		t.Fatal(err)
	}
	reqs := rc.take()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.method != http.MethodPost || string(r.body) != payload {
		t.Errorf("got %s %q, want POST %q", r.method, r.body, payload)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/json",
		"webhook-id":   "hook/order-42", // the delivery id, no longer the bare dedup key
		"X-Tenant":     "acme",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if err := verify(secretA, r.header, r.body, time.Now()); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	if verify(secretC, r.header, r.body, time.Now()) == nil {
		t.Error("signature verifies with a secret that was never configured")
	}
}

// TestSecretRotation configures two secrets: each receiver, holding either
// one, can verify.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, accept)
	s := build(t, map[string]any{"url": rc.URL, "secrets": []any{secretB, secretA}, "allow_private": true})
	if err := s.Deliver(t.Context(), delivery("k1", `{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	r := rc.take()[0]
	if sigs := strings.Fields(r.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Fatalf("webhook-signature %q, want two signatures", sigs)
	}
	for _, secret := range []string{secretA, secretB} {
		if err := verify(secret, r.header, r.body, time.Now()); err != nil {
			t.Errorf("does not verify with one of the rotated secrets: %v", err)
		}
	}
}

func TestNoSecretNoSignature(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, accept)
	s := build(t, map[string]any{"url": rc.URL, "allow_private": true})
	if err := s.Deliver(t.Context(), delivery("k1", `{}`)); err != nil {
		t.Fatal(err)
	}
	h := rc.take()[0].header
	if _, ok := h["Webhook-Signature"]; ok {
		t.Errorf("webhook-signature sent without a secret: %q", h.Get("webhook-signature"))
	}
	if h.Get("webhook-id") != "hook/k1" || h.Get("webhook-timestamp") == "" {
		t.Errorf("webhook-id %q, webhook-timestamp %q: want both set", h.Get("webhook-id"), h.Get("webhook-timestamp"))
	}
}

// TestDeliverStatusMapping drives the sink against a real server answering
// each status, and checks the outcome the relay is told.
func TestDeliverStatusMapping(t *testing.T) {
	t.Parallel()
	inAMinute := time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	tests := []struct {
		status     int
		retryAfter string
		want       string
		delay      time.Duration // for retry-after, give or take two seconds
	}{
		{http.StatusOK, "", "sent", 0},
		{http.StatusAccepted, "", "sent", 0},
		{http.StatusNoContent, "", "sent", 0},
		{http.StatusFound, "", "permanent", 0},
		{http.StatusBadRequest, "", "permanent", 0},
		{http.StatusUnauthorized, "", "permanent", 0},
		{http.StatusNotFound, "", "permanent", 0},
		{http.StatusGone, "", "permanent", 0},
		{http.StatusTooManyRequests, "17", "retry-after", 17 * time.Second},
		{http.StatusTooManyRequests, inAMinute, "retry-after", time.Minute},
		{http.StatusTooManyRequests, "", "retry", 0},
		{http.StatusInternalServerError, "", "retry", 0},
		{http.StatusBadGateway, "", "retry", 0},
		{http.StatusServiceUnavailable, "5", "retry-after", 5 * time.Second},
		{http.StatusServiceUnavailable, "", "retry", 0},
	}
	for _, tt := range tests {
		rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			if tt.retryAfter != "" {
				w.Header().Set("Retry-After", tt.retryAfter)
			}
			if tt.status == http.StatusFound {
				w.Header().Set("Location", "/elsewhere")
			}
			w.WriteHeader(tt.status)
			_, _ = io.WriteString(w, `{"error":"explained"}`)
		})
		s := build(t, map[string]any{"url": rc.URL, "allow_private": true})
		err := s.Deliver(t.Context(), delivery("k", `{}`))
		if got := kind(err); got != tt.want {
			t.Errorf("%d %q: %s (%v), want %s", tt.status, tt.retryAfter, got, err, tt.want)
		}
		if d, _ := sink.RetryAfterDelay(err); (d - tt.delay).Abs() > 2*time.Second {
			t.Errorf("%d %q: delay %s, want about %s", tt.status, tt.retryAfter, d, tt.delay)
		}
		if n := len(rc.take()); n != 1 {
			t.Errorf("%d: %d requests reached the receiver, want 1 (redirects are not followed)", tt.status, n)
		}
		if err != nil && !(strings.Contains(err.Error(), `webhook "hook"`) && strings.Contains(err.Error(), "explained")) {
			t.Errorf("%d: error %q should name the sink and quote the body", tt.status, err)
		}
	}
}

func TestTimeoutIsRetryable(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	s := build(t, map[string]any{"url": rc.URL, "timeout": "100ms", "allow_private": true})
	start := time.Now()
	err := s.Deliver(t.Context(), delivery("k", `{}`))
	if kind(err) != "retry" {
		t.Fatalf("a hanging receiver gave %v, want a retryable error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the 100ms timeout took %s", took)
	}
}

// TestSSRFGuard: without allow_private the sink refuses the loopback
// receiver, whether the URL names it by address or by a hostname resolving
// to it, and nothing reaches it. (Mutation: NewHTTPClient not installing
// guardDial fails this test.)
func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, accept)
	u, _ := url.Parse(rc.URL)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		s := build(t, map[string]any{"url": "http://" + host + ":" + u.Port() + "/hook", "secret": secretA})
		err := s.Deliver(t.Context(), delivery("k", `{}`))
		if kind(err) != "permanent" || !strings.Contains(err.Error(), "not public") {
			t.Errorf("%s: %v, want a permanent refusal of a non-public address", host, err)
		}
	}
	if n := len(rc.take()); n != 0 {
		t.Fatalf("%d requests reached the loopback receiver", n)
	}
	s := build(t, map[string]any{"url": "http://localhost:" + u.Port() + "/hook", "allow_private": true})
	if err := s.Deliver(t.Context(), delivery("k", `{}`)); err != nil {
		t.Fatalf("with allow_private: %v", err)
	}
}

func TestUnsendableDedupKeyIsPermanent(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, accept)
	s := build(t, map[string]any{"url": rc.URL, "secret": secretA, "allow_private": true})
	// A leading space or an empty key travels inside "hook/<key>" unchanged.
	for _, key := range []string{"trailing ", "new\nline", "tab\t"} {
		if err := s.Deliver(t.Context(), delivery(key, `{}`)); kind(err) != "permanent" {
			t.Errorf("key %q: %v, want permanent", key, err)
		}
	}
	if n := len(rc.take()); n != 0 {
		t.Errorf("%d requests sent with an unsendable key", n)
	}
}

func TestDeliverHonoursContext(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, accept)
	s := build(t, map[string]any{"url": rc.URL, "allow_private": true})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Deliver(ctx, delivery("k", `{}`)); kind(err) != "retry" {
		t.Errorf("cancelled context: %v, want a retryable error", err)
	}
}
