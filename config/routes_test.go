package config

import (
	"strings"
	"testing"
)

// TestRouteProblemsNameFileLineAndTemplate: a routes block's problems,
// reported with every other problem, each at its line and column: an
// unknown key with a suggestion, a target whose sink is not configured
// (also when written as a bare name), and a template that does not parse,
// naming the route, the sink and the template's own line.
func TestRouteProblemsNameFileLineAndTemplate(t *testing.T) {
	t.Parallel()
	doc := `sinks:
  hook: {type: webhook, options: {url: "https://example.com/hook"}}
  chat: {type: slack, options: {token: xoxb-1, channel: C0123}}
routes:
  orders:
    evnts: [order.*]
    to: [nope]
  incidents:
    events: [incident.*]
    to:
      - sink: chat
        template:
          text: |
            {{.data.title}}
            {{jsn .data}}
routes_unmatched: ignore
`
	problems := strings.Join(problemsOf(t, doc, nil), "\n")
	for _, want := range []string{
		"p.yaml:6:5: unknown key routes.orders.evnts (did you mean routes.orders.events?)",
		"p.yaml:7:10: routes.orders.to[0].sink: route orders: no sink named \"nope\" is configured",
		`p.yaml:13:11: routes.incidents.to[0].template.text: route incidents, sink chat: template: text:2: function "jsn" not defined`,
		`p.yaml:16:1: routes_unmatched: want "error" or "drop", got "ignore"`,
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
}

// TestRoutesKeepTheirCase: route names, template fields and sample data
// keep the case they are written in (viper would lower-case them), so a
// template reading .data.orderId checks against the sample's orderId.
func TestRoutesKeepTheirCase(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`sinks:
  hook: {type: webhook, options: {url: "https://example.com/hook"}}
routes:
  NewOrders:
    events: [order.*]
    to: [{sink: hook, template: {body: '{"id": {{json .data.orderId}}}'}}]
    sample: {type: order.created, data: {orderId: 42}}
`), "p.yaml", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.routes.Routes(); len(got) != 1 || got[0] != "NewOrders" {
		t.Errorf("routes %v, want NewOrders", got)
	}
}
