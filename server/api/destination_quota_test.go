package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
)

// TestQuotaRefusalsNameTheirKey: with quotas of 2 destinations and 2 test
// events a minute, the API refuses a third create with 422 and a third
// test event with 429 and a Retry-After of at most a minute, each error
// naming the quota's key and value; every answer matches openapi.json.
//
// Mutation, failing this test: destinationError without its QuotaError
// case (both refusals answer 500).
func TestQuotaRefusalsNameTheirKey(t *testing.T) {
	t.Parallel()
	_, router := openAPISpec(t)
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		api.Destinations = api.Outbox.Destinations(newKeyring(t)).WithQuotas(destinations.Quotas{EndpointsPerTenant: 2, TestEventsPerMinute: 2})
	})
	c := &contract{t: t, a: a, router: router, covered: map[string]bool{}}
	const base = "/v1/tenants/acme/destinations"
	var ids []string
	for i := range 2 {
		var created struct{ ID string }
		if err := json.Unmarshal(c.do(exchange{method: "POST", path: base, body: fmt.Sprintf(`{"url":"https://hooks.acme.example/%d"}`, i), status: 201}), &created); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, created.ID)
	}
	refused := string(c.do(exchange{method: "POST", path: base, body: `{"url":"https://hooks.acme.example/3"}`, status: 422}))
	if !strings.Contains(refused, destinations.KeyEndpointsPerTenant+": 2") {
		t.Errorf("the third create: %s; want the key and its value", refused)
	}
	test := base + "/" + ids[0] + "/test-event"
	c.do(exchange{method: "POST", path: test, status: 202})
	c.do(exchange{method: "POST", path: test, status: 202})
	resp, raw := a.send(t, http.MethodPost, test, operatorToken, "")
	wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(raw), destinations.KeyTestEventsPerMinute+": 2") ||
		wait < 1 || time.Duration(wait)*time.Second > time.Minute {
		t.Errorf("the third test event: %d, Retry-After %q, %s; want 429 naming the key within a minute", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	c.do(exchange{method: "POST", path: test, status: 429})
}
