package nats_test

import (
	"fmt"

	"github.com/outboxd/outboxd/registry"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// Importing the package registers the "nats" type; plugins.yaml (or a
// program) then builds named instances from options. Building does not
// connect: the first delivery does.
func Example() {
	sink, err := registry.Build(natssink.Type, "order-events", map[string]any{
		"url":     "nats://127.0.0.1:4222",
		"subject": `orders.{{or .OrderingKey "unordered"}}`,
		"stream":  "ORDERS",
		"timeout": "5s",
	})
	fmt.Println(sink != nil, err)

	// A subject template that refers to a field messages do not have is
	// refused when the sink is built, not on the first message.
	_, err = registry.Build(natssink.Type, "order-events", map[string]any{
		"url": "nats://127.0.0.1:4222", "subject": "orders.{{.Customer}}",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// sink "order-events" (type nats): option subject: not a valid template: template: destination:1:9: executing "destination" at <.Customer>: can't evaluate field Customer in type sinks.DestinationData
}
