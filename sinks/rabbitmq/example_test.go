package rabbitmq_test

import (
	"fmt"

	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// New builds a named instance from options, as the type "rabbitmq" in
// plugins.yaml does. Building does not connect: the first delivery does.
func Example() {
	sink, err := rabbitmq.New("order-events", map[string]any{
		"url":         "amqp://rabbitmq.internal:5672/orders",
		"username":    "outboxd",
		"password":    "from-the-environment",
		"exchange":    "orders",
		"routing_key": `orders.{{or .OrderingKey "unordered"}}`,
	})
	fmt.Println(sink != nil, err)

	// A URL that does not parse is refused without being repeated: it may
	// hold a password.
	_, err = rabbitmq.New("order-events", map[string]any{
		"url": "amqp://outboxd:secret@rabbitmq.internal:port/",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// option url: not an amqp:// or amqps:// URL with a host (and a numeric port, if any)
}
