package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/portal"
	"github.com/outboxd/outboxd/server/telemetry"
)

// How the document is validated: kin-openapi (openapi3) loads and
// validates openapi.json as OpenAPI 3.1, and openapi3filter validates each
// request and answer against it with its JSON Schema 2020-12 validator,
// which it turns on for 3.1 documents (type arrays such as
// ["string", "null"], const). TestOpenAPIDocumentIsValid checks the
// document once more with an independent validator,
// @apidevtools/swagger-parser.

// describedAhead are operations openapi.json describes before their
// handler exists (the audit trail's, issue 24): each is checked against a
// live answer as soon as its route is registered.
var describedAhead = map[string]bool{"GET /v1/audit": true}

// openAPISpec loads and validates openapi.json.
func openAPISpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// exchange is one request to the live API and what the test expects.
type exchange struct {
	method, path, body string
	status             int
	// noToken sends no bearer token, token another than operatorToken;
	// contentType replaces application/json, and bare sends no
	// Content-Type at all (as curl -X DELETE and generated clients call
	// an endpoint without a body).
	noToken     bool
	token       string
	contentType string
	bare        bool
	// invalid says the request breaks the document on purpose (a body
	// that is not JSON, a parameter out of range): only the answer is
	// validated.
	invalid bool
}

// contract sends exchanges to the live API and validates each request and
// answer against openapi.json, remembering which operations answered 2xx.
type contract struct {
	t       *testing.T
	a       *operatorAPI
	router  routers.Router
	covered map[string]bool // "METHOD /path/{template}" answered 2xx
}

// bearerPresent is the document's bearer scheme as a request validator
// sees it: the token's value is the server's to judge.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
		return in.NewError(fmt.Errorf("no bearer token"))
	}
	return nil
}

// do sends e and validates it; it returns the answer's body.
func (c *contract) do(e exchange) []byte {
	c.t.Helper()
	newRequest := func() *http.Request {
		req, err := http.NewRequest(e.method, c.a.srv.URL+e.path, strings.NewReader(e.body))
		if err != nil {
			c.t.Fatal(err)
		}
		if !e.bare {
			req.Header.Set("Content-Type", cmp.Or(e.contentType, "application/json"))
		}
		if !e.noToken {
			req.Header.Set("Authorization", "Bearer "+cmp.Or(e.token, operatorToken))
		}
		return req
	}
	name := e.method + " " + e.path
	req := newRequest()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s: not in openapi.json: %v", name, err)
	}
	input := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent, IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateRequest(c.a.ctx, input); err != nil && !e.invalid {
		c.t.Errorf("%s: the request does not match openapi.json: %v", name, err)
	} else if err == nil && e.invalid {
		c.t.Errorf("%s: a request meant to break the document passes it", name)
	}
	resp, raw := roundTrip(c.t, newRequest())
	if resp.StatusCode != e.status {
		c.t.Errorf("%s: %d %s, want %d", name, resp.StatusCode, raw, e.status)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(raw)), Options: input.Options}
	if err := openapi3filter.ValidateResponse(c.a.ctx, out); err != nil {
		c.t.Errorf("%s: the %d answer does not match openapi.json: %v\n%s", name, resp.StatusCode, err, raw)
	}
	if resp.StatusCode < 300 {
		c.covered[e.method+" "+route.Path] = true
	}
	return raw
}

// TestOpenAPIDescribesEveryEndpoint runs every endpoint of a live API on
// PostgreSQL, its answers of success and the errors a client meets, and
// validates each request and answer against openapi.json with
// kin-openapi's openapi3filter. Every registered route must be described
// and answered with success at least once; every described operation must
// have a route (or be described ahead of its handler, describedAhead).
// Mutation: registering a route that openapi.json does not describe, a
// field added to an answer (additionalProperties is false), or a status
// the document does not list for the operation makes this fail.
func TestOpenAPIDescribesEveryEndpoint(t *testing.T) {
	t.Parallel()
	doc, router := openAPISpec(t)
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		keys := newKeyring(t)
		api.Destinations, api.Portal = api.Outbox.Destinations(keys), newPortalLinks(t, keys)
		tel, err := telemetry.New(t.Context(), api.Config.Telemetry, config.EnvMap(nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		api.Meters, api.metrics = tel.MeterProvider, tel.Metrics
		// serve's reload is tested with the binary (test/e2e); here only
		// the answer's shape matters.
		api.Reload = func(context.Context, audit.Actor) error { return nil }
	})
	c := &contract{t: t, a: a, router: router, covered: map[string]bool{}}
	dead := a.deadRows(t, "partner", "HTTP 500: boom", "HTTP 400: rejected", "HTTP 500: again")

	for _, e := range []exchange{
		{method: "POST", path: "/v1/messages", body: `{"sink":"partner","dedup_key":"k-1","payload":{"n":1}}`, status: 201},
		{method: "POST", path: "/v1/messages", body: `{"sink":"partner","dedup_key":"k-1","payload":{"n":1}}`, status: 200},
		{method: "POST", path: "/v1/messages", body: `{"sink":"nope","dedup_key":"k-2","payload":{}}`, status: 422},
		{method: "POST", path: "/v1/messages", body: `{"sink":`, status: 400, invalid: true},
		{method: "POST", path: "/v1/messages", body: `{}`, contentType: "text/plain", status: 415, invalid: true},
		{method: "POST", path: "/v1/messages", body: `{"sink":"partner","dedup_key":"k-3","payload":{}}`, noToken: true, status: 401, invalid: true},
		{method: "POST", path: "/v1/events", body: `{"type":"order.paid","key":"o-1","data":{"total":3}}`, status: 422},
		{method: "GET", path: "/v1/stats", status: 200},
		{method: "GET", path: "/v1/dlq?sink=partner&limit=2", status: 200},
		{method: "GET", path: "/v1/dlq?limit=0", status: 400, invalid: true},
		{method: "POST", path: "/v1/dlq/redrive", body: fmt.Sprintf(`{"ids":[%d],"dry_run":true}`, dead[0]), status: 200},
		{method: "POST", path: "/v1/dlq/redrive", body: fmt.Sprintf(`{"ids":[%d]}`, dead[0]), status: 200},
		{method: "POST", path: "/v1/dlq/redrive", body: `{"all":true,"sink":"partner","token":"not-a-token"}`, status: 422},
		{method: "POST", path: "/v1/dlq/purge", body: fmt.Sprintf(`{"ids":[%d, 999999999]}`, dead[1]), status: 200},
		{method: "POST", path: "/v1/dlq/purge", body: `{"ids":[1],"all":true}`, status: 422},
		{method: "GET", path: "/v1/messages?sink=partner&limit=1", status: 200},
		{method: "GET", path: "/v1/messages?status=lost", status: 400, invalid: true},
		{method: "GET", path: fmt.Sprintf("/v1/messages/%d", dead[2]), status: 200},
		{method: "GET", path: "/v1/messages/999999999", status: 404},
		{method: "GET", path: "/v1/messages/abc", status: 400, invalid: true},
		{method: "POST", path: "/v1/sinks/partner/pause", body: `{"for":"1h","by":"ops","reason":"partner maintenance"}`, status: 200},
		{method: "POST", path: "/v1/sinks/partner/pause", body: `{"for":"soon"}`, status: 422},
		{method: "POST", path: "/v1/sinks/ghost/pause", body: `{}`, status: 404},
		{method: "POST", path: "/v1/sinks/partner/resume", body: `{"by":"ops"}`, status: 200},
		{method: "DELETE", path: "/v1/sinks/partner/pause", status: 409},
		{method: "POST", path: "/v1/sinks/ghost/pause", body: `{"force":true}`, status: 200},
		{method: "DELETE", path: "/v1/sinks/ghost/pause", status: 200},
		{method: "DELETE", path: "/v1/sinks/ghost/pause", status: 404},
		{method: "GET", path: "/healthz", noToken: true, status: 200},
		{method: "GET", path: "/readyz", noToken: true, status: 200},
		{method: "GET", path: "/metrics", noToken: true, status: 200},
		{method: "POST", path: ReloadPath, status: 200},
		{method: "POST", path: ReloadPath, noToken: true, status: 401, invalid: true},
	} {
		c.do(e)
	}
	if got := c.do(exchange{method: "GET", path: openAPIPath, status: 200}); !bytes.Equal(got, openAPIDocument) {
		t.Errorf("GET %s does not serve openapi.json", openAPIPath)
	}

	// A confirmation whose selection changed since its dry run (a counted
	// row purged meanwhile): 409.
	var dry struct{ Token string }
	if err := json.Unmarshal(c.do(exchange{method: "POST", path: "/v1/dlq/purge", body: `{"all":true,"dry_run":true}`, status: 200}), &dry); err != nil {
		t.Fatal(err)
	}
	c.do(exchange{method: "POST", path: "/v1/dlq/purge", body: fmt.Sprintf(`{"ids":[%d]}`, dead[2]), status: 200})
	c.do(exchange{method: "POST", path: "/v1/dlq/purge", body: fmt.Sprintf(`{"all":true,"token":%q}`, dry.Token), status: 409})

	// Publishing through routes applied to the database.
	if _, err := a.ob.Routes().Apply(a.ctx, a.pool, a.api.Config.RouteTable(), testdb.Actor); err != nil {
		t.Fatal(err)
	}
	c.do(exchange{method: "POST", path: "/v1/events", body: `{"type":"order.paid","key":"o-2","data":{"total":3}}`, status: 201})

	c.destinationExchanges()

	// Without OUTBOXD_SECRETS_KEY no secret can be sealed: 503.
	keyless := newOperatorAPI(t, openAPIConfig, func(api *served) {
		api.Destinations = api.Outbox.Destinations(nil)
	})
	for _, e := range []exchange{
		{method: "POST", path: "/v1/tenants/acme/destinations", body: `{"url":"https://hooks.acme.example/outboxd"}`, status: 503},
		{method: "POST", path: "/v1/tenants/acme/portal", status: 503},
	} {
		(&contract{t: t, a: keyless, router: router, covered: c.covered}).do(e)
	}

	// The metrics are served beside the API, at the path its document
	// gives them (server.newMux).
	metrics := route{method: http.MethodGet, path: MetricsPath}
	routes := slices.Concat(a.api.apiRoutes(), a.api.openRoutes(), a.api.adminRoutes(), []route{metrics})
	registered := map[string]bool{}
	for _, rt := range routes {
		op := rt.method + " " + rt.path
		registered[op] = true
		if describedAhead[op] && !c.covered[op] {
			c.do(exchange{method: rt.method, path: rt.path + "?since=1h&limit=10", status: 200})
		}
		if item := doc.Paths.Find(rt.path); item == nil || item.GetOperation(rt.method) == nil {
			t.Errorf("%s is served but openapi.json does not describe it", op)
		} else if !c.covered[op] {
			t.Errorf("%s: no exchange of this test answered it with success", op)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if op := method + " " + path; !registered[op] && !describedAhead[op] {
				t.Errorf("openapi.json describes %s, which no route serves", op)
			}
		}
	}
}

// openAPIConfig is operatorConfig with a read-only token, a destinations
// sink and a route fanning invoices out to their account's destinations.
const openAPIConfig = `http:
  token: ` + operatorToken + `
  tokens:
    - {name: viewer, token: ` + viewerToken + `, role: read}
sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "whsec_dGhlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQtMzJieXRlcw=="}
  customers:
    type: destinations
routes:
  orders: {events: [order.*], to: [partner]}
  billing: {events: [invoice.*], to: [{sink: customers, tenant: "{{.data.account}}"}]}
event_types:
  - {name: invoice.paid, description: An invoice was paid., example: {invoice: inv_1, amount: 12}, schema: {type: object}}
`

// viewerToken is a token of role read.
const viewerToken = "viewer-test-token"

// newKeyring is a keyring of a fresh key, as serve reads
// OUTBOXD_SECRETS_KEY.
func newKeyring(t *testing.T) *destinations.Keyring {
	t.Helper()
	key, err := destinations.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := destinations.ParseKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// newPortalLinks signs portal links with keys, as serve does.
func newPortalLinks(t *testing.T, keys *destinations.Keyring) *portal.Links {
	t.Helper()
	p, err := portal.NewLinks(keys)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// destinationExchanges runs every destinations endpoint, its successes
// and the errors a client meets, and a publish fanning out to a tenant's
// destination and to a tenant without one (the routes applied already).
// Mutation: dropping tenant from Published's messages, or waiting from
// Destination, in openapi.json, answering 400 for a refused value (422
// in the document), or leaving the destinations routes out of apiRoutes
// makes TestOpenAPIDescribesEveryEndpoint fail.
func (c *contract) destinationExchanges() {
	c.t.Helper()
	const base = "/v1/tenants/acme/destinations"
	var created struct{ ID string }
	if err := json.Unmarshal(c.do(exchange{method: "POST", path: base, status: 201,
		body: `{"url":"https://hooks.acme.example/outboxd","events":["invoice.*"],"description":"acme production","rate_limit":5,"metadata":{"plan":"pro"}}`}), &created); err != nil {
		c.t.Fatal(err)
	}
	one := base + "/" + created.ID
	for _, e := range []exchange{
		{method: "POST", path: base, body: `{"url":"ftp://hooks.acme.example/outboxd"}`, status: 422},
		{method: "POST", path: base, body: `{"url":`, status: 400, invalid: true},
		{method: "POST", path: base, body: `{"url":"https://hooks.acme.example/x"}`, contentType: "text/plain", status: 415, invalid: true},
		{method: "POST", path: base, body: `{"url":"https://hooks.acme.example/x"}`, token: viewerToken, status: 403},
		{method: "POST", path: base, body: `{"url":"https://hooks.acme.example/x"}`, noToken: true, status: 401, invalid: true},
		{method: "GET", path: "/v1/tenants/" + strings.Repeat("t", destinations.MaxTenantBytes+1) + "/destinations", status: 400, invalid: true},
		{method: "GET", path: base + "?limit=1", status: 200},
		{method: "GET", path: base + "?limit=0", status: 400, invalid: true},
		{method: "GET", path: one, token: viewerToken, status: 200},
		{method: "GET", path: base + "/dst_nope", status: 404},
		{method: "PATCH", path: one, body: `{"description":"acme, v2","events":["invoice.*","order.*"],"metadata":{"plan":"team"}}`, status: 200},
		{method: "PATCH", path: one, body: `{"url":"ftp://hooks.acme.example/outboxd"}`, status: 422},
		{method: "PATCH", path: one, body: `{"rate_limit":0}`, status: 422, invalid: true},
		{method: "PATCH", path: base + "/dst_nope", body: `{}`, status: 404},
		{method: "POST", path: one + "/rotate-secret", body: `{"overlap":"24h"}`, status: 200},
		{method: "POST", path: one + "/rotate-secret", status: 200},
		{method: "POST", path: one + "/rotate-secret", body: `{"overlap":"soon"}`, status: 422},
		{method: "POST", path: one + "/disable", body: `{"reason":"endpoint moving"}`, status: 200},
		{method: "POST", path: one + "/enable", status: 200},
		{method: "POST", path: one + "/enable", token: viewerToken, status: 403},
		{method: "POST", path: base + "/dst_nope/disable", status: 404},
		{method: "GET", path: base + "/dst_nope/deliveries", status: 404},
		{method: "POST", path: one + "/recover", body: `{"since":"2026-01-02T14:00:00Z","include_delivered":true,"dry_run":true}`, status: 200},
		{method: "POST", path: one + "/recover?dry_run=true", body: `{"since":"2026-01-02T14:00:00Z","until":"2026-01-02T15:00:00Z"}`, status: 200},
		{method: "POST", path: one + "/recover", body: `{"since":"2026-01-02T14:00:00Z"}`, status: 422},
		{method: "POST", path: one + "/recover", body: `{"since":"14:00","dry_run":true}`, status: 422, invalid: true},
		{method: "POST", path: one + "/recover", body: `{"since":"2026-01-02T14:00:00Z","token":"0.00000000000000000000000000000000"}`, status: 422},
		{method: "POST", path: base + "/dst_nope/recover", body: `{"since":"2026-01-02T14:00:00Z","dry_run":true}`, status: 404},
		{method: "POST", path: "/v1/tenants/acme/portal", body: `{"expires_in":"30m"}`, status: 200},
		{method: "POST", path: "/v1/tenants/acme/portal", status: 200},
		{method: "POST", path: "/v1/tenants/acme/portal", body: `{"expires_in":"soon"}`, status: 422},
		{method: "POST", path: "/v1/tenants/acme/portal", body: `{"expires_in":"48h"}`, status: 422},
		{method: "POST", path: "/v1/tenants/acme/portal", body: `{"expires":"1h"}`, status: 400, invalid: true},
		{method: "POST", path: "/v1/tenants/acme/portal", token: viewerToken, status: 403},
	} {
		c.do(e)
	}

	// A publish names each fanned-out row's tenant and count, with a
	// note when nothing matched.
	for account, want := range map[string]int{"acme": 1, "nobody": 0} {
		var published struct {
			Messages []struct {
				Tenant       string
				Destinations *int
				Note         string
			}
		}
		body := fmt.Sprintf(`{"type":"invoice.paid","key":"i-%s","data":{"account":%q}}`, account, account)
		if err := json.Unmarshal(c.do(exchange{method: "POST", path: "/v1/events", body: body, status: 201}), &published); err != nil {
			c.t.Fatal(err)
		}
		if m := published.Messages; len(m) != 1 || m[0].Tenant != account || m[0].Destinations == nil || *m[0].Destinations != want || (want == 0) != (m[0].Note != "") {
			c.t.Errorf("publishing for %s answered %+v, want its tenant and %d destinations", account, m, want)
		}
	}

	var deliveries struct{ Deliveries []json.RawMessage }
	if err := json.Unmarshal(c.do(exchange{method: "GET", path: one + "/deliveries?limit=5", status: 200}), &deliveries); err != nil {
		c.t.Fatal(err)
	}
	if len(deliveries.Deliveries) != 1 {
		c.t.Errorf("deliveries of %s: %d, want the one fanned out to it", created.ID, len(deliveries.Deliveries))
	}
	// A message of its own for the destination (enqueue_destination()),
	// through a sink of type destinations only.
	welcome := func(sink, destination string) string {
		return fmt.Sprintf(`{"sink":%q,"destination":%q,"dedup_key":"welcome","payload":{"hello":"acme"}}`, sink, destination)
	}
	for _, e := range []exchange{
		{method: "POST", path: "/v1/messages", body: welcome("customers", created.ID), status: 201},
		{method: "POST", path: "/v1/messages", body: welcome("customers", created.ID), status: 200},
		{method: "POST", path: "/v1/messages", body: welcome("customers", "dst_nope"), status: 422},
		{method: "POST", path: "/v1/messages", body: welcome("partner", created.ID), status: 422},
		{method: "POST", path: "/v1/dlq/purge", body: fmt.Sprintf(`{"all":true,"waiting":true,"destination":%q,"dry_run":true}`, created.ID), status: 200},
		{method: "POST", path: "/v1/dlq/redrive", body: fmt.Sprintf(`{"all":true,"destination":%q}`, created.ID), status: 422},
		{method: "GET", path: one + "/deliveries?before=0", status: 400, invalid: true},
		{method: "POST", path: one + "/test-event", status: 202},
		{method: "POST", path: base + "/dst_nope/test-event", status: 404},
		{method: "GET", path: "/v1/tenants/acme/event-types", status: 200},
		{method: "POST", path: one + "/test-event", body: `{"type":"invoice.paid"}`, status: 202},
		{method: "POST", path: one + "/test-event", body: `{"type":"invoice.lost"}`, status: 422},
		{method: "DELETE", path: one + "?dry_run=maybe", status: 400, invalid: true},
		{method: "DELETE", path: one, status: 422},
		{method: "DELETE", path: one + "?token=1.00000000000000000000000000000000", status: 409},
	} {
		c.do(e)
	}
	var counted struct{ Token string }
	if err := json.Unmarshal(c.do(exchange{method: "DELETE", path: one + "?dry_run=true", status: 200}), &counted); err != nil {
		c.t.Fatal(err)
	}
	c.do(exchange{method: "DELETE", path: one + "?token=" + counted.Token, status: 200})
	c.do(exchange{method: "DELETE", path: one + "?token=" + counted.Token, status: 404})
}

// TestWrongMethodAnswers405WithAllow: a method a path does not have
// answers 405 with the path's methods in Allow, before the Content-Type
// check (DELETE /v1/stats used to answer 415) and after the token check.
// Mutation: requireJSON wrapping the whole /v1 mux again (415 first), or
// no fallback route per path (the mux's text/plain 405), makes this fail.
func TestWrongMethodAnswers405WithAllow(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, operatorConfig)
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/stats", "GET, HEAD"},
		{"PUT", "/v1/messages", "GET, HEAD, POST"},
		{"GET", "/v1/dlq/purge", "POST"},
		{"PATCH", "/v1/sinks/partner/pause", "DELETE, POST"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		// As curl -X DELETE sends it: no body, no Content-Type.
		req, err := http.NewRequest(tc.method, a.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		resp, raw := roundTrip(t, req)
		var body struct{ Error string }
		err = json.Unmarshal(raw, &body)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || err != nil || !strings.Contains(body.Error, tc.allow) {
			t.Errorf("%s %s: %d, Allow %q, error %q (%v); want 405, Allow %q named in a JSON error", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body.Error, err, tc.allow)
		}
	}
	if status := a.do(t, "DELETE", "/v1/stats", "", "", nil); status != http.StatusUnauthorized {
		t.Errorf("DELETE /v1/stats without the token: %d, want 401 (the token is checked first)", status)
	}
}
