package pagerduty_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/pagerduty"
	"github.com/outboxd/outboxd/sinks/pagerduty/fakepagerduty"
)

// newFake starts a fake PagerDuty that stops when t ends.
func newFake(t testing.TB) *fakepagerduty.Server {
	t.Helper()
	f := fakepagerduty.New()
	t.Cleanup(f.Close)
	return f
}

// build builds a pagerduty sink called name with opts, failing t on error.
func build(t testing.TB, name string, opts map[string]any) sink.Sink {
	t.Helper()
	s, err := pagerduty.Type.New(name, opts, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// to builds a sink called name sending to f with the fake's routing key.
func to(t testing.TB, name string, f *fakepagerduty.Server) sink.Sink {
	t.Helper()
	return build(t, name, map[string]any{"routing_key": fakepagerduty.RoutingKey, "events_url": f.URL()})
}

// delivery is row id of sink name with payload and ordering key.
func delivery(id int64, name, dedupKey, orderingKey, payload string) *sink.Delivery {
	return &sink.Delivery{ID: id, Sink: name, DedupKey: dedupKey, OrderingKey: orderingKey, Payload: json.RawMessage(payload), Attempt: 1}
}

// deliver delivers d through s and returns its error.
func deliver(t testing.TB, s sink.Sink, d *sink.Delivery) error {
	t.Helper()
	return s.Deliver(context.Background(), d)
}

// receipt decodes d's receipt.
func receipt(t testing.TB, d *sink.Delivery) map[string]string {
	t.Helper()
	var r map[string]string
	if err := json.Unmarshal(d.Receipt(), &r); err != nil {
		t.Fatalf("receipt %s: %v", d.Receipt(), err)
	}
	return r
}
