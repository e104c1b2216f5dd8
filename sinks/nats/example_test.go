package nats_test

import (
	"fmt"

	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// New builds a named instance from options, as the type "nats" in
// plugins.yaml does. Building does not connect: the first delivery does.
func Example() {
	sink, err := natssink.New("order-events", map[string]any{
		"url":     "nats://127.0.0.1:4222",
		"subject": `orders.{{or .OrderingKey "unordered"}}`,
		"stream":  "ORDERS",
		"timeout": "5s",
	})
	fmt.Println(sink != nil, err)

	// A subject template that refers to a field messages do not have is
	// refused when the sink is built, not on the first message.
	_, err = natssink.New("order-events", map[string]any{
		"url": "nats://127.0.0.1:4222", "subject": "orders.{{.Customer}}",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// option subject: not a valid template: template: destination:1:9: executing "destination" at <.Customer>: can't evaluate field Customer in type sinks.DestinationData
}
