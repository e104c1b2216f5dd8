package pagerduty_test

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/pagerduty"
	"github.com/outboxd/outboxd/sinks/pagerduty/fakepagerduty"
)

// Options the sink cannot run with are refused when the configuration is
// checked, naming the option and never the routing key.
// Mutation: dropping the severity check in Options.check fails its case.
func TestBadOptionsAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts map[string]any
		want string
	}{
		{"no routing key", map[string]any{}, "option routing_key: required"},
		{"blank routing key", map[string]any{"routing_key": "  "}, "option routing_key: required"},
		{"events url not http", map[string]any{"routing_key": fakepagerduty.RoutingKey, "events_url": "ftp://pd"}, "option events_url"},
		{"severity outside the enum", map[string]any{"routing_key": fakepagerduty.RoutingKey, "severity": "fatal"}, `option severity "fatal"`},
		{"timeout not positive", map[string]any{"routing_key": fakepagerduty.RoutingKey, "timeout": "0s"}, "option timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pagerduty.Type.New("oncall", tc.opts, sink.Env{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), fakepagerduty.RoutingKey) {
				t.Errorf("the error shows the routing key: %v", err)
			}
		})
	}
}

// The sink's default rate limit is PagerDuty's documented 120 events per
// minute per routing key; a sink has one routing key, so it is not per key.
func TestTheDefaultRateLimitIsPagerDutys(t *testing.T) {
	t.Parallel()
	s := build(t, "oncall", map[string]any{"routing_key": fakepagerduty.RoutingKey})
	got := s.(sink.RateLimitDefaulter).DefaultRateLimit()
	if want := (sink.RateLimit{Rate: 120, Per: 60e9, Burst: 1}); got != want {
		t.Errorf("default rate limit %+v, want %+v", got, want)
	}
}

// The registered shape is the sink's, and a target without a template
// triggers with the event's type and key as summary and its data as
// custom_details.
func TestAnUntemplatedEventTriggers(t *testing.T) {
	t.Parallel()
	shape := pagerduty.Type.Shape
	raw, err := shape.Untemplated(sink.Event{Type: "disk.full", Key: "db-1", Data: []byte(`{"free":0}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"summary":"disk.full db-1","custom_details":{"free":0}}`; string(raw) != want {
		t.Errorf("untemplated payload %s, want %s", raw, want)
	}
}
