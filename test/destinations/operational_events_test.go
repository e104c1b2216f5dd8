package destinations_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// operationalEvent is an operational event as a tenant's endpoint gets it.
type operationalEvent struct {
	Type string
	Data map[string]any
}

// operational returns the operational events path received, in order.
func (r *receiver) operational(path string) []operationalEvent {
	var out []operationalEvent
	for _, req := range r.requests(path) {
		var ev operationalEvent
		if json.Unmarshal([]byte(req.body), &ev) == nil && strings.HasPrefix(ev.Type, "outboxd.destination.") {
			out = append(out, ev)
		}
	}
	return out
}

// TestOperationalEventsReachOnlyTheTenantsOwnEndpoints runs outboxd serve
// with two tenants, each with an endpoint subscribed to
// outboxd.destination.*; acme also has an endpoint that goes down. Its
// breaker opens: acme's subscribed endpoint gets
// outboxd.destination.failing about it (its id, description, state and
// since; no sink or internal name), and the API shows it failing with
// its last failure and the failed attempts among its 24-hour figures. The
// endpoint comes back: outboxd.destination.recovered, health back to
// healthy with a last success and delivered figures. It goes down for
// good: failing again, then outboxd.destination.disabled once
// auto_disable_after passes. globex's subscribed endpoint gets none of
// it, ever, and an acme endpoint whose payload filter takes only
// data.state "disabled" gets only the disabling. Then `destinations
// test-event --type` sends acme's endpoint an operational event's example.
//
// Mutations checked: destination_tenant_notice.sql joining every
// destination instead of "d.tenant = about.tenant" fails it (globex's
// endpoint gets acme's failing, recovered and disabled); without its
// filter_path condition the filtered endpoint gets failing and recovered
// too.
func TestOperationalEventsReachOnlyTheTenantsOwnEndpoints(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "/acme")
	o := serve(t, setup{poll: "200ms", options: "auto_disable_after: 8s"})
	endpoint := func(tenant, path, description string, events ...string) destinations.Created {
		var c destinations.Created
		o.call(t, http.MethodPost, "/v1/tenants/"+tenant+"/destinations",
			map[string]any{"url": rcv.URL + path, "events": events, "description": description}, &c)
		return c
	}
	failing := endpoint("acme", "/acme", "acme orders", "order.*")
	ops := endpoint("acme", "/acme-ops", "acme on-call", "outboxd.destination.*")
	// An endpoint whose payload filter takes only the disabling.
	var onlyDisabled destinations.Created
	o.call(t, http.MethodPost, "/v1/tenants/acme/destinations", map[string]any{"url": rcv.URL + "/acme-disabled",
		"events": []string{"outboxd.destination.*"}, "filter": map[string]any{"data.state": destinations.HealthDisabled}}, &onlyDisabled)
	endpoint("globex", "/globex-ops", "globex on-call", "outboxd.destination.*")
	endpoint("globex", "/globex", "globex orders", "order.*")

	publish := func(round string, n int) {
		for i := range n {
			o.publishSQL(t, true, [3]string{"order.created", "acme", fmt.Sprintf("%s-%d", round, i)},
				[3]string{"order.created", "globex", fmt.Sprintf("%s-%d", round, i)})
		}
	}
	waitFor := func(what string, n int, typ string) operationalEvent {
		t.Helper()
		var got operationalEvent
		testrelay.WaitFor(t, deliveryTimeout, what, func() bool {
			seen := 0
			for _, ev := range rcv.operational("/acme-ops") {
				if ev.Type == typ {
					if seen++; seen == n {
						got = ev
						return true
					}
				}
			}
			return false
		})
		if got.Data["destination"] != failing.ID || got.Data["description"] != "acme orders" || got.Data["since"] == nil {
			t.Errorf("%s: data %v, want the failing endpoint's id, description and since", typ, got.Data)
		}
		for k, v := range got.Data {
			if s := fmt.Sprint(v); strings.Contains(s, "customers") || k == "sink" || k == "key" {
				t.Errorf("%s names an internal name: %s = %v", typ, k, v)
			}
		}
		return got
	}
	type detail struct {
		Health   destinations.Health `json:"health"`
		Stats24h destinations.Stats  `json:"stats_24h"`
	}
	var d detail

	publish("a", 6)
	if ev := waitFor("outboxd.destination.failing at acme's endpoint", 1, destinations.EventFailing); ev.Data["state"] != destinations.HealthFailing {
		t.Errorf("failing: state %v", ev.Data["state"])
	}
	testrelay.WaitFor(t, deliveryTimeout, "the API showing the endpoint failing with its failed attempts", func() bool {
		o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+failing.ID, nil, &d)
		return d.Health.State == destinations.HealthFailing && d.Health.Since != nil && d.Health.LastFailure != nil && d.Stats24h.Failed > 0
	})
	if strings.Contains(d.Health.LastError+d.Health.Reason, "customers") {
		t.Errorf("the health names the sink: %+v", d.Health)
	}

	rcv.setDead("/acme", false)
	if ev := waitFor("outboxd.destination.recovered at acme's endpoint", 1, destinations.EventRecovered); ev.Data["state"] != destinations.HealthHealthy {
		t.Errorf("recovered: state %v", ev.Data["state"])
	}
	testrelay.WaitFor(t, deliveryTimeout, "the API showing the endpoint healthy, with its deliveries counted", func() bool {
		o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+failing.ID, nil, &d)
		return d.Health.State == destinations.HealthHealthy && d.Health.LastSuccess != nil && d.Stats24h.Delivered > 0 && d.Stats24h.P50Ms > 0
	})

	rcv.setDead("/acme", true)
	publish("b", 6)
	waitFor("outboxd.destination.failing again", 2, destinations.EventFailing)
	ev := waitFor("outboxd.destination.disabled at acme's endpoint", 1, destinations.EventDisabled)
	if ev.Data["state"] != destinations.HealthDisabled || strings.Contains(fmt.Sprint(ev.Data["reason"]), "auto_disable_after") {
		t.Errorf("disabled: state %v, reason %q (want the tenant's words)", ev.Data["state"], ev.Data["reason"])
	}
	o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+failing.ID, nil, &d)
	if d.Health.State != destinations.HealthDisabled || strings.Contains(d.Health.Reason, "auto_disable_after") {
		t.Errorf("the disabled endpoint's health: %+v", d.Health)
	}
	if got := rcv.operational("/globex-ops"); len(got) != 0 {
		t.Errorf("globex's endpoint received acme's operational events: %+v", got)
	}
	testrelay.WaitFor(t, deliveryTimeout, "the disabling at the endpoint whose filter takes only that", func() bool {
		return len(rcv.operational("/acme-disabled")) > 0
	})
	if got := rcv.operational("/acme-disabled"); len(got) != 1 || got[0].Type != destinations.EventDisabled {
		t.Errorf("the endpoint filtering on data.state %q received %+v, want only outboxd.destination.disabled", destinations.HealthDisabled, got)
	}
	if got := rcv.operational("/acme"); len(got) != 0 {
		t.Errorf("the endpoint not subscribed to them received operational events: %+v", got)
	}

	// The CLI sends a test event of a catalog type, with its example.
	o.run(t, "destinations", "test-event", ops.ID, "--tenant", "acme", "--type", destinations.EventRecovered)
	example, _ := destinations.OperationalEventTypes().Lookup(destinations.EventRecovered)
	var want map[string]any
	_ = json.Unmarshal(example.Example, &want)
	testrelay.WaitFor(t, deliveryTimeout, "the CLI's test event of type outboxd.destination.recovered", func() bool {
		for _, ev := range rcv.operational("/acme-ops") {
			if ev.Type == destinations.EventRecovered && ev.Data["destination"] == want["destination"] {
				return true
			}
		}
		return false
	})
}
