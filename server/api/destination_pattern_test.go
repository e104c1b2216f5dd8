package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestDestinationPatternOverBoundsIs422: a destination whose event
// pattern is the 9,001-byte "**." pattern, or 17 segments deep,
// is refused on create and on update with 422 and a message naming the
// field and the pattern's index (issue 41, finding 1); nothing is stored.
//
// Mutation: destinations' checkPatterns without its CheckPattern call
// (today's code, which checks the syntax alone) creates both and fails
// it.
func TestDestinationPatternOverBoundsIs422(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, openAPIConfig, func(api *served) {
		api.Destinations = api.Outbox.Destinations(newKeyring(t))
	})
	const base = "/v1/tenants/acme/destinations"
	var created struct{ ID string }
	if got := a.do(t, http.MethodPost, base, operatorToken, `{"url":"https://hooks.acme.example/outboxd","events":["order.*"]}`, &created); got != http.StatusCreated {
		t.Fatalf("create: %d", got)
	}
	for pattern, says := range map[string]string{
		strings.Repeat("**.", 3000) + "x":                 "events[1]: pattern is 9001 bytes, over the limit of 256",
		strings.TrimSuffix(strings.Repeat("a.", 17), "."): "events[1]: pattern has 17 segments, over the limit of 16",
	} {
		events, err := json.Marshal([]string{"order.*", pattern})
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range []struct{ method, path, body string }{
			{http.MethodPost, base, `{"url":"https://hooks.acme.example/outboxd","events":` + string(events) + `}`},
			{http.MethodPatch, base + "/" + created.ID, `{"events":` + string(events) + `}`},
		} {
			resp, raw := a.send(t, req.method, req.path, operatorToken, req.body)
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(raw), says) {
				t.Errorf("%s %s: %d %.200s; want 422 saying %q", req.method, req.path, resp.StatusCode, raw, says)
			}
		}
	}
	var list struct{ Destinations []struct{ Events []string } }
	if got := a.do(t, http.MethodGet, base, operatorToken, "", &list); got != http.StatusOK ||
		len(list.Destinations) != 1 || strings.Join(list.Destinations[0].Events, ",") != "order.*" {
		t.Errorf("after the refusals: %d %+v; want the one destination, subscribed to order.* still", got, list)
	}
}
