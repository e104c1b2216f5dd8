package rabbitmq_test

import (
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// Type builds a named instance from options, as `type: rabbitmq` in
// plugins.yaml does. Building does not connect: the first delivery does.
func Example() {
	s, err := rabbitmq.Type.New("order-events", map[string]any{
		"url":         "amqp://rabbitmq.internal:5672/orders",
		"username":    "outboxd",
		"password":    "from-the-environment",
		"exchange":    "orders",
		"routing_key": `orders.{{or .OrderingKey "unordered"}}`,
	}, sink.Env{})
	fmt.Println(s != nil, err)

	// A URL that does not parse is refused without being repeated: it may
	// hold a password.
	_, err = rabbitmq.Type.New("order-events", map[string]any{
		"url": "amqp://outboxd:secret@rabbitmq.internal:port/",
	}, sink.Env{})
	fmt.Println(err)
	// Output:
	// true <nil>
	// option url: not an amqp:// or amqps:// URL with a host (and a numeric port, if any)
}
