package rabbitmq_test

import (
	"fmt"

	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// Importing the package registers the "rabbitmq" type; plugins.yaml (or a
// program) then builds named instances from options. Building does not
// connect: the first delivery does.
func Example() {
	sink, err := registry.Build(rabbitmq.Type, "order-events", map[string]any{
		"url":         "amqp://rabbitmq.internal:5672/orders",
		"username":    "outboxd",
		"password":    "from-the-environment",
		"exchange":    "orders",
		"routing_key": `orders.{{or .OrderingKey "unordered"}}`,
	})
	fmt.Println(sink != nil, err)

	// A URL that does not parse is refused without being repeated: it may
	// hold a password.
	_, err = registry.Build(rabbitmq.Type, "order-events", map[string]any{
		"url": "amqp://outboxd:secret@rabbitmq.internal:port/",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// sink "order-events" (type rabbitmq): option url: not an amqp:// or amqps:// URL with a host (and a numeric port, if any)
}
