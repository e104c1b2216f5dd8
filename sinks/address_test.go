package sinks_test

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks"
)

func TestAddressRendersTheMessage(t *testing.T) {
	t.Parallel()
	d := &sink.Delivery{DedupKey: "order-7", OrderingKey: "customer-42", Headers: map[string]string{"region": "eu"}}
	unordered := &sink.Delivery{DedupKey: "order-8"}
	tests := []struct {
		text string
		d    *sink.Delivery
		want string
	}{
		{"orders", d, "orders"},
		{"orders.{{.Sink}}", d, "orders.events"},
		{"orders.{{.OrderingKey}}.{{.DedupKey}}", d, "orders.customer-42.order-7"},
		{"orders.{{.Headers.region}}", d, "orders.eu"},
		{`orders.{{or .OrderingKey "unordered"}}`, unordered, "orders.unordered"},
	}
	for _, tt := range tests {
		addr, err := sinks.ParseAddress(tt.text)
		if err != nil {
			t.Fatalf("%s: %v", tt.text, err)
		}
		got, err := addr.Render("events", tt.d)
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.text, got, err, tt.want)
		}
	}
}

func TestAddressErrors(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"":                     "is required",
		"orders.{{.Sink":       "not a valid template",
		"orders.{{.Customer}}": "can't evaluate field Customer",
	} {
		if _, err := sinks.ParseAddress(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", text, err, want)
		}
	}
	// A header the message lacks is the message's problem, found when it
	// is routed.
	addr, err := sinks.ParseAddress("orders.{{.Headers.region}}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := addr.Render("events", &sink.Delivery{}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("missing header: %v, want an error naming it", err)
	}
}
