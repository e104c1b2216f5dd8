package kafka_test

import (
	"fmt"

	"github.com/outboxd/outboxd/sinks/kafka"
)

// New builds a named instance from options, as the type "kafka" in
// plugins.yaml does. Building does not connect: the first delivery does.
func Example() {
	sink, err := kafka.New("order-events", map[string]any{
		"brokers":        []any{"kafka-1:9092", "kafka-2:9092"},
		"topic":          "orders",
		"sasl_mechanism": kafka.SASLScramSHA512,
		"username":       "outboxd",
		"password":       "from-the-environment",
		"tls":            true,
	})
	fmt.Println(sink != nil, err)

	// Credentials without a mechanism are refused, naming the options.
	_, err = kafka.New("order-events", map[string]any{
		"brokers": []any{"kafka-1:9092"}, "topic": "orders", "username": "outboxd", "password": "x",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// options username and password need sasl_mechanism
}
