package kafka_test

import (
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/kafka"
)

// Type builds a named instance from options, as `type: kafka` in
// plugins.yaml does. Building does not connect: the first delivery does.
func Example() {
	s, err := kafka.Type.New("order-events", map[string]any{
		"brokers":        []any{"kafka-1:9092", "kafka-2:9092"},
		"topic":          "orders",
		"sasl_mechanism": kafka.SASLScramSHA512,
		"username":       "outboxd",
		"password":       "from-the-environment",
		"tls":            true,
	}, sink.Env{})
	fmt.Println(s != nil, err)

	// Credentials without a mechanism are refused, naming the options.
	_, err = kafka.Type.New("order-events", map[string]any{
		"brokers": []any{"kafka-1:9092"}, "topic": "orders", "username": "outboxd", "password": "x",
	}, sink.Env{})
	fmt.Println(err)
	// Output:
	// true <nil>
	// options username and password need sasl_mechanism
}
