package destinations_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/destinations"
)

// A tenant reads its deliveries' errors without internal network facts:
// no refused loopback or private address, no resolver, no sink name, no
// route in an event's key; public addresses, the tenant's own host name
// and the receiver's answer stay. (Mutations: TenantError without the
// resolver rewrite leaves 10.255.255.53; without the address scan leaves
// 192.168.7.9; ForTenant keeping d.Sink fails the sink check.)
func TestTenantErrorsHoldNoInternalFacts(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`destinations "a-internal": destination dst_1: Post "REDACTED": dial tcp 127.0.0.1:8090: address is not public: 127.0.0.1 is loopback (set allow_private to connect to it)`: `destination dst_1: Post "REDACTED": ` + destinations.PolicyRefusal,
		`destinations "customers": destination dst_1: dial tcp: lookup hooks.acme.example on 10.255.255.53:53: no such host`:                                                        `destination dst_1: dial tcp: lookup hooks.acme.example: no such host`,
		`destinations "customers": destination dst_1: dial tcp [::1]:443: connect: connection refused`:                                                                              `destination dst_1: dial tcp [internal address]: connect: connection refused`,
		`destinations "customers": destination dst_1: HTTP 500: upstream 192.168.7.9 failed`:                                                                                        `destination dst_1: HTTP 500: upstream [internal address] failed`,
		`destinations "customers": destination dst_1: dial tcp 93.184.215.14:443: i/o timeout`:                                                                                      `destination dst_1: dial tcp 93.184.215.14:443: i/o timeout`,
	}
	for in, want := range cases {
		if got := destinations.TenantError(in); got != want {
			t.Errorf("TenantError(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	attempts, _ := json.Marshal([]map[string]any{{"attempt": 1, "error": `destinations "customers": lookup x on 10.255.255.53:53: timeout`}})
	got := destinations.ForTenant([]destinations.Delivery{{FailedAttempts: attempts, MessageSummary: operator.MessageSummary{
		Sink: "customers", DedupKey: "order.created/order-42/billing/dst_abc", LastError: `destinations "customers": lookup x on 10.255.255.53:53: timeout`}}})[0]
	if got.Sink != "" || got.DedupKey != "order.created/order-42" || strings.Contains(got.LastError, "10.255") ||
		strings.Contains(string(got.FailedAttempts), "10.255") || strings.Contains(string(got.FailedAttempts), "customers") {
		t.Errorf("ForTenant = %+v (attempts %s): want no sink, route or resolver", got, got.FailedAttempts)
	}
}

// Credentials in a destination's URL are redacted for every reader: user
// info and credential-like query values; the rest stays. (Mutation:
// RedactURL keeping u.User fails the first case.)
func TestRedactURLHidesCredentials(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://user:pass@hooks.acme.example/in":                 "https://REDACTED@hooks.acme.example/in",
		"https://hooks.acme.example/in?token=s3cret&team=blue":    "https://hooks.acme.example/in?team=blue&token=REDACTED",
		"https://hooks.acme.example/in?api_key=1&X-Signature=abc": "https://hooks.acme.example/in?X-Signature=REDACTED&api_key=REDACTED",
		"https://hooks.acme.example/in":                           "https://hooks.acme.example/in",
	} {
		if got := destinations.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
