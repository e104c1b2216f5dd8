package nats_test

import (
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// Type builds a named instance from options, as `type: nats` in
// plugins.yaml does. Building does not connect: the first delivery does.
func Example() {
	s, err := natssink.Type.New("order-events", map[string]any{
		"url":     "nats://127.0.0.1:4222",
		"subject": `orders.{{or .OrderingKey "unordered"}}`,
		"stream":  "ORDERS",
		"timeout": "5s",
	}, sink.Env{})
	fmt.Println(s != nil, err)

	// A subject template that refers to a field messages do not have is
	// refused when the sink is built, not on the first message.
	_, err = natssink.Type.New("order-events", map[string]any{
		"url": "nats://127.0.0.1:4222", "subject": "orders.{{.Customer}}",
	}, sink.Env{})
	fmt.Println(err)
	// Output:
	// true <nil>
	// option subject: not a valid template: template: address:1:9: executing "address" at <.Customer>: can't evaluate field Customer in type sinks.AddressData
}
