package api

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/internal/testkit/consoletest"
	"github.com/outboxd/outboxd/server/console"
)

// rolesConfig has a token of role produce and a trusted proxy on the
// loopback address, so that a request names its user and role in
// headers, for the API and the console alike.
const rolesConfig = `http:
  token: ` + operatorToken + `
  tokens:
    - {name: producer, token: ` + producerToken + `, role: produce}
  trusted_proxy:
    user_header: X-Forwarded-User
    role_header: X-Forwarded-Role
    sources: [127.0.0.1/32, "::1/128"]
sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "whsec_dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQtMzJieXRlcw=="}
`

// producerToken is a token of role produce.
const producerToken = "producer-test-token"

// Each console page shows what an API endpoint serves, and needs the
// role that endpoint needs: a produce identity, which the API refuses
// every read, reads no page (destinations with credentials in their
// URLs, messages with payloads, the audit trail); read and above read
// them all, in the console as in the API. A produce token cannot sign in
// at all, and is told why.
// (Mutations, each failing this test: the console's pages registered
// without their role, as before issue 43, every page 200 to produce;
// postSignIn without its role check, a produce session set.)
func TestConsolePagesNeedTheRolesOfTheAPIsEndpoints(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, rolesConfig, withDestinations(t, slog.New(slog.DiscardHandler)))
	var dest struct{ ID string }
	body := `{"url":"https://user:hunter2@hooks.acme.example/outboxd"}`
	if status := a.do(t, "POST", "/v1/tenants/acme/destinations", operatorToken, body, &dest); status != http.StatusCreated {
		t.Fatalf("create a destination: %d", status)
	}
	dead := a.deadRows(t, "partner", "HTTP 500: boom")
	// Each console page, and the API endpoint that serves its data.
	pages := []struct{ page, api string }{
		{"/", "/v1/stats"},
		{"/messages", "/v1/messages"},
		{fmt.Sprintf("/messages/%d", dead[0]), fmt.Sprintf("/v1/messages/%d", dead[0])},
		{"/dead-letters", "/v1/dlq"},
		{"/audit", "/v1/audit"},
		{"/destinations", "/v1/tenants/acme/destinations"},
		{"/tenants/acme/destinations/" + dest.ID, "/v1/tenants/acme/destinations/" + dest.ID},
		{"/overview/events", "/v1/stats"},
		{"/sinks/partner", "/v1/stats"},
	}
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(path string, role access.Role) (int, string) {
		req, err := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-User", "erin")
		req.Header.Set("X-Forwarded-Role", string(role))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.Header.Get("Content-Type") == "text/event-stream" {
			return resp.StatusCode, "" // a live stream never ends: its headers say enough
		}
		page, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(page)
	}
	for _, role := range access.Roles {
		for _, p := range pages {
			apiStatus, _ := status(p.api, role)
			pageStatus, page := status(p.page, role)
			if apiStatus != http.StatusOK && apiStatus != http.StatusForbidden {
				t.Fatalf("GET %s as %s: %d", p.api, role, apiStatus)
			}
			if pageStatus != apiStatus {
				t.Errorf("role %s: the console's %s answers %d, the API's %s %d", role, p.page, pageStatus, p.api, apiStatus)
			}
			if role == access.RoleProduce && (pageStatus != http.StatusForbidden || !strings.Contains(page, "read role") || strings.Contains(page, "hunter2")) {
				t.Errorf("role produce: %s answers %d, want 403 naming the read role and nothing of the data", p.page, pageStatus)
			}
		}
	}

	b := consoletest.New(t, a.srv.URL)
	b.Get("/signin")
	resp, page := b.Post("/signin", url.Values{"token": {producerToken}, "next": {"/"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "produce role") || b.Cookies[console.SessionCookie] != nil {
		t.Errorf("signing in with a produce token: %d, cookie %v, want 403 saying why, no session\n%s", resp.StatusCode, b.Cookies[console.SessionCookie], page)
	}
}
