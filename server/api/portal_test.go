package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/consoletest"
	"github.com/outboxd/outboxd/server/portal"
)

// newPortalAPI serves openAPIConfig's API with a destinations store, the
// portal's links and a console serving the portal, as serve has them
// with OUTBOXD_SECRETS_KEY set; the API's log goes to logs.
func newPortalAPI(t *testing.T, logs *bytes.Buffer) *operatorAPI {
	t.Helper()
	return newOperatorAPI(t, openAPIConfig, withDestinations(t, slog.New(slog.NewTextHandler(logs, nil))))
}

// withDestinations gives an API a destinations store, the portal's links
// and a console serving both, as serve has them with
// OUTBOXD_SECRETS_KEY set; the API logs to log.
func withDestinations(t *testing.T, log *slog.Logger) func(*served) {
	return func(api *served) {
		keys := newKeyring(t)
		api.Destinations, api.Portal = api.Outbox.Destinations(keys), newPortalLinks(t, keys)
		api.Log = log
		api.console = newConsole(t, api.API, slog.New(slog.DiscardHandler))
	}
}

// portalLink asks the API for tenant's portal link with body.
func (a *operatorAPI) portalLink(t *testing.T, tenant, body string, header ...string) (PortalLink, int) {
	t.Helper()
	req, err := http.NewRequest("POST", a.srv.URL+"/v1/tenants/"+tenant+"/portal", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, raw := roundTrip(t, req)
	var link PortalLink
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &link); err != nil {
			t.Fatal(err)
		}
	}
	return link, resp.StatusCode
}

// POST /v1/tenants/{tenant}/portal answers a link below the host it was
// asked at (https behind a TLS proxy) that expires after expires_in (1h
// without), never logged; the link opens that tenant's portal through the
// whole API handler, which shows its destinations only and answers 404 to
// another tenant's; a read token may not make one, nor anyone when the
// console, which serves the portal, is off.
// (Mutations, each failing this test: createPortalLink ignoring
// expires_in; BaseURL always http; the route declared with role read;
// logging the link; the portal listing every tenant's destinations;
// createPortalLink without its check of the console.)
func TestPortalLinkOpensOnlyItsTenantsPortal(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	a := newPortalAPI(t, &logs)
	var acme, globex struct{ ID string }
	for tenant, out := range map[string]any{"acme": &acme, "globex": &globex} {
		body := fmt.Sprintf(`{"url": "https://hooks.%s.example/outboxd"}`, tenant)
		if status := a.do(t, "POST", "/v1/tenants/"+tenant+"/destinations", operatorToken, body, out); status != http.StatusCreated {
			t.Fatalf("create %s's destination: %d", tenant, status)
		}
	}

	before := time.Now()
	link, status := a.portalLink(t, "acme", "")
	if status != http.StatusOK || !strings.HasPrefix(link.URL, a.srv.URL+portal.OpenPath+"?") {
		t.Fatalf("a portal link: %d %+v, want one below %s", status, link, a.srv.URL)
	}
	if lasts := link.ExpiresAt.Sub(before); lasts < portal.DefaultLinkLifetime-2*time.Second || lasts > portal.DefaultLinkLifetime {
		t.Errorf("a link without expires_in lasts %s, want %s", lasts, portal.DefaultLinkLifetime)
	}
	short, _ := a.portalLink(t, "acme", `{"expires_in": "10m"}`)
	if lasts := short.ExpiresAt.Sub(before); lasts < 10*time.Minute-2*time.Second || lasts > 10*time.Minute+2*time.Second {
		t.Errorf("a link of 10m lasts %s", lasts)
	}
	if tls, _ := a.portalLink(t, "acme", "", "X-Forwarded-Proto", "https"); !strings.HasPrefix(tls.URL, "https://") {
		t.Errorf("a link asked for over TLS: %s, want https", tls.URL)
	}
	sig, _ := url.Parse(link.URL)
	if strings.Contains(logs.String(), sig.Query().Get("sig")) {
		t.Error("the API's log holds a link's signature")
	}
	if status := a.do(t, "POST", "/v1/tenants/acme/portal", viewerToken, "", nil); status != http.StatusForbidden {
		t.Errorf("a read token's portal link: %d, want 403", status)
	}

	noConsole := newOperatorAPI(t, strings.Replace(openAPIConfig, "http:\n", "http:\n  ui: false\n", 1), func(api *served) {
		api.Destinations, api.Portal = a.api.Destinations, a.api.Portal
	})
	if resp, raw := noConsole.send(t, "POST", "/v1/tenants/acme/portal", operatorToken, ""); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(raw), "http.ui") {
		t.Errorf("a portal link without the console: %d %s, want 503 naming http.ui", resp.StatusCode, raw)
	}

	b := consoletest.New(t, a.srv.URL)
	if resp, body := b.Get(strings.TrimPrefix(link.URL, a.srv.URL)); resp.StatusCode != http.StatusOK {
		t.Fatalf("opening the link: %d\n%s", resp.StatusCode, body)
	}
	_, page := b.Get("/portal/")
	if !strings.Contains(page, acme.ID) || strings.Contains(page, globex.ID) {
		t.Errorf("acme's portal:\n%s", page)
	}
	if resp, _ := b.Get("/portal/destinations/" + acme.ID); resp.StatusCode != http.StatusOK {
		t.Errorf("acme's destination in its portal: %d, want 200", resp.StatusCode)
	}
	for _, req := range []struct{ method, path string }{
		{"GET", "/portal/destinations/" + globex.ID},
		{"POST", "/portal/destinations/" + globex.ID + "/delete"},
		{"POST", "/portal/destinations/" + globex.ID + "/rotate-secret"},
	} {
		var resp *http.Response
		if req.method == "GET" {
			resp, _ = b.Get(req.path)
		} else {
			resp, _ = b.Post(req.path, url.Values{"confirm": {"yes"}})
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s in acme's portal: %d, want 404", req.method, req.path, resp.StatusCode)
		}
	}
	if status := a.do(t, "GET", "/v1/tenants/globex/destinations/"+globex.ID, operatorToken, "", nil); status != http.StatusOK {
		t.Errorf("globex's destination after acme's portal tried to delete it: %d, want 200", status)
	}
}
