package kafka_test

import (
	"fmt"

	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/kafka"
)

// Importing the package registers the "kafka" type; plugins.yaml (or a
// program) then builds named instances from options. Building does not
// connect: the first delivery does.
func Example() {
	sink, err := registry.Build(kafka.Type, "order-events", map[string]any{
		"brokers":        []any{"kafka-1:9092", "kafka-2:9092"},
		"topic":          "orders",
		"sasl_mechanism": kafka.SASLScramSHA512,
		"username":       "outboxd",
		"password":       "from-the-environment",
		"tls":            true,
	})
	fmt.Println(sink != nil, err)

	// Credentials without a mechanism are refused, naming the options.
	_, err = registry.Build(kafka.Type, "order-events", map[string]any{
		"brokers": []any{"kafka-1:9092"}, "topic": "orders", "username": "outboxd", "password": "x",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// sink "order-events" (type kafka): options username and password need sasl_mechanism
}
