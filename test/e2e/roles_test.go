package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/audit"
)

// Tokens of the role tests: one per role, and http.token as the admin's.
const (
	readToken    = "e2e-read-token-0123456789"
	produceToken = "e2e-produce-token-0123456"
	operateToken = "e2e-operate-token-0123456"
)

// rolesYAML is the http block of the role tests (indented under http:).
const rolesYAML = "  token: " + apiToken + `
  tokens:
    - {name: viewer, token: ` + readToken + `, role: read}
    - {name: app, token: ` + produceToken + `, role: produce}
    - {name: ops, token: ` + operateToken + `, role: operate}
`

// insertDead stores n dead rows of sink, which no relay here delivers.
func (e *env) insertDead(sink string, n int) {
	e.t.Helper()
	for i := range n {
		if _, err := e.pool.Exec(context.Background(), "INSERT INTO "+e.schema+`.messages (sink, dedup_key, payload, status, attempts, last_error)
			VALUES ($1, $2, '{}', 'dead', 1, '503')`, sink, fmt.Sprint(sink, "-", i)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// The role matrix against the real binary: every endpoint with each role's
// token, none and a wrong one. A read token's purge is refused with 403
// naming the operate role and deletes nothing; the operate token's
// succeeds; `outboxd audit list -o json` and GET /v1/audit name the
// operate token, its role, its address and what it purged, and nothing
// for the refused purge or a dry run.
// (Mutations, each failing this test: allow() passing every role; Allows
// letting read do operate's actions; Purge not writing its audit entry;
// the audit entry written for a dry run.)
func TestRoleMatrixAndTheAuditTrailOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  partner:\n    type: discard\n", rolesYAML)
	e.mustRun("migrate")
	srv := e.serve()
	e.insertDead("gone", 2)

	tokens := map[string]string{"read": readToken, "produce": produceToken, "operate": operateToken, "admin": apiToken}
	allowed := map[string][]string{
		"read": {"read", "operate", "admin"}, "produce": {"produce", "admin"}, "operate": {"operate", "admin"},
	}
	for _, ep := range []struct{ method, path, body, need string }{
		{"GET", "/v1/stats", "", "read"},
		{"GET", "/v1/dlq", "", "read"},
		{"GET", "/v1/messages", "", "read"},
		{"GET", "/v1/messages/999999", "", "read"},
		{"GET", "/v1/audit", "", "read"},
		{"POST", "/v1/messages", `{"sink": "partner", "dedup_key": "k", "payload": {}}`, "produce"},
		{"POST", "/v1/events", `{"type": "t", "key": "k", "data": {}}`, "produce"},
		{"POST", "/v1/dlq/redrive", `{"all": true, "sink": "nothing", "dry_run": true}`, "operate"},
		{"POST", "/v1/dlq/purge", `{"all": true, "sink": "nothing", "dry_run": true}`, "operate"},
		{"POST", "/v1/sinks/partner/pause", `{"for": "1m"}`, "operate"},
		{"POST", "/v1/sinks/partner/resume", `{}`, "operate"},
		{"DELETE", "/v1/sinks/nothing/pause", "", "operate"},
	} {
		for role, token := range tokens {
			code, body := call(t, ep.method, srv.url(ep.path), token, ep.body)
			may := false
			for _, r := range allowed[ep.need] {
				may = may || r == role
			}
			switch {
			case may && (code == http.StatusUnauthorized || code == http.StatusForbidden):
				t.Errorf("%s %s with the %s token: %d %v, want it allowed", ep.method, ep.path, role, code, body)
			case !may && (code != http.StatusForbidden || body["required_role"] != ep.need):
				t.Errorf("%s %s with the %s token: %d %v, want 403 naming required_role %q", ep.method, ep.path, role, code, body, ep.need)
			}
		}
		for name, token := range map[string]string{"no token": "", "a wrong token": "e2e-wrong-token"} {
			if code, _ := call(t, ep.method, srv.url(ep.path), token, ep.body); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d, want 401", ep.method, ep.path, name, code)
			}
		}
	}

	before := e.auditCount()
	code, body := call(t, "POST", srv.url("/v1/dlq/purge"), readToken, `{"all": true, "sink": "gone"}`)
	if code != http.StatusForbidden || body["required_role"] != "operate" || !strings.Contains(fmt.Sprint(body["error"]), "viewer") {
		t.Fatalf("purge with the read token: %d %v; want 403 naming the operate role and the token", code, body)
	}
	if n, _, _ := e.rowCounts("gone"); n["dead"] != 2 {
		t.Fatalf("after the refused purge: %v; want both dead letters kept", n)
	}
	if code, body := call(t, "POST", srv.url("/v1/dlq/purge"), operateToken, `{"all": true, "sink": "gone", "dry_run": true}`); code != http.StatusOK || body["purged"] != 2.0 {
		t.Fatalf("dry run with the operate token: %d %v", code, body)
	}
	if n := e.auditCount(); n != before {
		t.Fatalf("the refused purge and the dry run wrote %d audit entries; want none", n-before)
	}
	if code, body := call(t, "POST", srv.url("/v1/dlq/purge"), operateToken, `{"all": true, "sink": "gone"}`); code != http.StatusOK || body["purged"] != 2.0 {
		t.Fatalf("purge with the operate token: %d %v; want 2 purged", code, body)
	}

	var listed struct{ Entries []audit.Entry }
	if err := json.Unmarshal([]byte(e.mustRun("audit", "list", "--since", "1h", "-o", "json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Entries) == 0 {
		t.Fatal("audit list: no entries")
	}
	purge := listed.Entries[0]
	var filter map[string]any
	_ = json.Unmarshal(purge.Filter, &filter)
	if purge.Action != "purge" || purge.Actor != "ops" || purge.Role != "operate" || purge.Source != "127.0.0.1" || purge.Sink != "gone" ||
		purge.Count != 2 || len(filter) != 2 || filter["all"] != true || filter["sink"] != "gone" {
		t.Fatalf("the newest audit entry: %+v (filter %s); want ops's purge of 2 dead letters of gone from 127.0.0.1", purge, purge.Filter)
	}
	if table := e.mustRun("audit", "list"); !strings.Contains(table, "ops") || !strings.Contains(table, "purge") {
		t.Fatalf("audit list's table lacks ops's purge:\n%s", table)
	}
	var page struct{ Entries []audit.Entry }
	req, _ := http.NewRequest("GET", srv.url("/v1/audit?since=1h&limit=1"), nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 || len(page.Entries) != 1 || page.Entries[0].ID != purge.ID {
		t.Fatalf("GET /v1/audit with the read token: %d %+v %v; want ops's purge alone", resp.StatusCode, page, err)
	}
}

// auditCount counts the schema's audit entries.
func (e *env) auditCount() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+e.schema+".audit_log").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A trusted proxy's user and role headers are believed from its
// configured source addresses only: with 127.0.0.1 among them, a pause
// sent with them is alice's (in the audit trail and on the sink), a role
// header of read is refused the pause with 403, and without the user
// header a token is still needed; with only other addresses configured,
// the same headers are ignored and the request is 401.
// (Mutations, each failing this test: FromProxy not checking the source;
// the role header ignored in favour of default_role; the audit actor
// taken from the request's "by" instead of the identity.)
func TestTrustedProxyHeadersOnlyFromConfiguredSources(t *testing.T) {
	t.Parallel()
	proxy := func(sources string) string {
		return "  trusted_proxy: {user_header: X-Forwarded-User, role_header: X-Forwarded-Role, default_role: read, sources: [" + sources + "]}\n"
	}
	trusted := newEnv(t, "  partner:\n    type: discard\n", "  token: "+apiToken+"\n"+proxy("10.0.0.0/8, 127.0.0.1/32"))
	trusted.mustRun("migrate")
	srv := trusted.serve()
	pause := srv.url("/v1/sinks/partner/pause")
	code, body := call(t, "POST", pause, "", `{"for": "1m", "by": "someone else", "reason": "maintenance"}`,
		"X-Forwarded-User", "alice", "X-Forwarded-Role", "operate")
	if code != http.StatusOK || body["changed_by"] != "someone else (alice)" {
		t.Fatalf("pause through the trusted proxy: %d %v; want it done, recorded as alice's", code, body)
	}
	var actor, role, source string
	if err := trusted.pool.QueryRow(context.Background(), "SELECT actor, role, source FROM "+trusted.schema+".audit_log WHERE action = 'pause'").
		Scan(&actor, &role, &source); err != nil || actor != "alice" || role != "operate" || source != "127.0.0.1" {
		t.Fatalf("the pause's audit entry: %q %q %q, %v; want alice, operate, 127.0.0.1", actor, role, source, err)
	}
	if code, body := call(t, "POST", pause, "", `{"for": "1m"}`, "X-Forwarded-User", "bob", "X-Forwarded-Role", "read"); code != http.StatusForbidden || body["required_role"] != "operate" {
		t.Fatalf("pause by a reader through the proxy: %d %v; want 403 naming operate", code, body)
	}
	if code, _ := call(t, "GET", srv.url("/v1/stats"), "", "", "X-Forwarded-Role", "admin"); code != http.StatusUnauthorized {
		t.Fatalf("a role header without a user: %d, want 401", code)
	}

	elsewhere := newEnv(t, "  partner:\n    type: discard\n", "  token: "+apiToken+"\n"+proxy("10.9.0.0/16"))
	elsewhere.mustRun("migrate")
	other := elsewhere.serve()
	if code, body := call(t, "GET", other.url("/v1/stats"), "", "", "X-Forwarded-User", "alice", "X-Forwarded-Role", "admin"); code != http.StatusUnauthorized {
		t.Fatalf("proxy headers from an address that is not the proxy's: %d %v; want 401 (ignored)", code, body)
	}
	if code, _ := call(t, "GET", other.url("/v1/stats"), apiToken, "", "X-Forwarded-User", "alice"); code != http.StatusOK {
		t.Fatalf("the admin token beside ignored proxy headers: %d, want 200", code)
	}
}
