package destinations_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// csrfInput finds a portal form's CSRF token.
var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// The findings 3, 4 and 5 with the real binary: beside a sink
// a-internal allowing private addresses (the first sink by name, which
// test events go through), a tenant's endpoint on an internal address is
// refused at the door with 422 naming url, by the API, the CLI and the
// portal, at create and at "Send a test event"; one stored before the
// policy (through the Go API) is not reached by a published event, refused
// at connect time; what the tenant then reads in the portal and in the
// API's deliveries names neither the internal address, the sink nor the
// internal service's answer; minting the portal link is in the audit
// trail, and what the tenant does through it is recorded as the tenant's
// by the link's minter.
// (Mutations, each failing this test: Store.checkURL answering nil: the
// API creates the internal endpoint (201); each destinations sink keeping
// its own allow_private (applyDestinationNetwork not handing out the one
// policy): the internal service is reached and its body shown; the
// portal showing deliveries without destinations.ForTenant: the refused
// address 127.0.0.1 is shown; RecordPortalLink left out of the API: no
// portal_link entry.)
func TestTenantCannotReachOrReadTheInternalNetwork(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		http.Error(w, "internal billing db: password=hunter2", http.StatusInternalServerError)
	}))
	t.Cleanup(internal.Close)
	o := serve(t, setup{strict: true, poll: "1s",
		sinks: "  a-internal:\n    type: destinations\n    options: {allow_private: true}\n    max_attempts: 3\n"})
	hook := internal.URL + "/hook"

	// At the door: the API and the CLI refuse the internal endpoint.
	refusedAtDoor := func(where string, code int, body string) {
		t.Helper()
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "url: ") || strings.Contains(body, "hunter2") {
			t.Errorf("%s: %d %s; want 422 naming url", where, code, body)
		}
	}
	code, _, body := o.post(t, "/v1/tenants/acme/destinations", `{"url": "`+hook+`", "events": ["order.*"]}`)
	refusedAtDoor("the API's create", code, body)
	r, err := proc.Run(t.Context(), binary, o.env, nil, "--config", o.config, "destinations", "create", "--tenant", "acme", "--url", hook)
	if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, "url: ") {
		t.Errorf("destinations create of an internal endpoint: %v, exit %d, %s; want a refusal naming url", err, r.Code, r.Stderr)
	}

	// One stored before the policy, as a program storing through the Go
	// API without it did.
	d := o.storeUnchecked(t, "acme", destinations.Spec{URL: hook, Events: []string{"order.*"}})
	code, _, body = o.post(t, "/v1/tenants/acme/destinations/"+d.ID+"/test-event", "")
	refusedAtDoor("the API's test event", code, body)

	// The tenant's portal, through a link minted by the API.
	portal := o.openPortal(t, "acme")
	csrf := portal.csrf("/portal/destinations/" + d.ID)
	code, body = portal.post("/portal/destinations/"+d.ID+"/test", url.Values{"csrf": {csrf}})
	refusedAtDoor("the portal's Send a test event", code, body)
	code, body = portal.post("/portal/destinations", url.Values{"csrf": {csrf}, "url": {hook}, "events": {"order.*"}})
	refusedAtDoor("the portal's create", code, body)
	if ds := o.list(t, "acme"); len(ds) != 1 {
		t.Fatalf("acme has %d destinations, want only the one stored before the policy", len(ds))
	}

	// A published event for it is refused for good at connect time.
	o.publishHTTP(t, "order.created", "acme", "o-1")
	testrelay.WaitFor(t, deliveryTimeout, "the event dead (refused by the network policy)", func() bool {
		return o.statusCounts(t, d.ID)["dead"] == 1
	})
	if n := reached.Load(); n != 0 {
		t.Fatalf("the internal service was reached %d times, want never", n)
	}
	// An action through the link, for the audit trail.
	if code, body := portal.post("/portal/destinations/"+d.ID+"/disable", url.Values{"csrf": {csrf}}); code != http.StatusOK {
		t.Fatalf("the portal's disable: %d %s", code, body)
	}

	var deliveries struct {
		Deliveries []json.RawMessage `json:"deliveries"`
	}
	o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+d.ID+"/deliveries", nil, &deliveries)
	apiText, _ := json.Marshal(deliveries)
	page := portal.get("/portal/destinations/" + d.ID)
	// The tenant's own URL is its own to see; the rest names nothing internal.
	page = strings.ReplaceAll(page, hook, "")
	for where, text := range map[string]string{"the portal": page, "the API's deliveries": string(apiText)} {
		for _, secret := range []string{"127.0.0.1", "a-internal", "hunter2"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows %q to the tenant:\n%s", where, secret, text)
			}
		}
		if !strings.Contains(text, "refused by the network policy") {
			t.Errorf("%s does not say the network policy refused the endpoint:\n%s", where, text)
		}
	}

	var audit struct {
		Entries []struct {
			Actor  string `json:"actor"`
			Action string `json:"action"`
		} `json:"entries"`
	}
	o.call(t, http.MethodGet, "/v1/audit", nil, &audit)
	var minted, byLink bool
	for _, e := range audit.Entries {
		minted = minted || e.Action == "portal_link"
		byLink = byLink || (e.Action == "destination_disable" && strings.HasPrefix(e.Actor, "tenant acme (link by "))
	}
	if !minted || !byLink {
		t.Errorf("audit trail %+v: want the portal_link and the portal's disable as tenant acme (link by ...)", audit.Entries)
	}
}

// storeUnchecked creates a destination of tenant through the Go API
// without the network policy, as a program did before the policy
// refused its URL: the door's checks are the API's, the CLI's and the
// portal's.
func (o *outbox) storeUnchecked(t *testing.T, tenant string, spec destinations.Spec) destinations.Created {
	t.Helper()
	ob, err := outboxd.New(o.pool, outboxd.Options{Schema: o.schema})
	if err != nil {
		t.Fatal(err)
	}
	var keys *destinations.Keyring
	for _, kv := range o.env {
		if v, ok := strings.CutPrefix(kv, destinations.EnvSecretsKey+"="); ok {
			if keys, err = destinations.ParseKeyring(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, err := ob.Destinations(keys).Create(t.Context(), o.pool, testdb.Actor, tenant, spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// list returns tenant's destinations, as the API lists them.
func (o *outbox) list(t *testing.T, tenant string) []destinations.Destination {
	t.Helper()
	var page struct {
		Destinations []destinations.Destination `json:"destinations"`
	}
	o.call(t, http.MethodGet, "/v1/tenants/"+tenant+"/destinations", nil, &page)
	return page.Destinations
}
