// Package builtin registers the sink types of the stock outboxd binary:
// the ones of package nobrokers, and the broker sinks (NATS JetStream,
// RabbitMQ, Kafka). The binary's main calls Register before cmd.Main; a
// custom build calls it too, or nobrokers.Register, and registers its own
// types beside them.
package builtin

import (
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/builtin/nobrokers"
	"github.com/outboxd/outboxd/sinks/kafka"
	"github.com/outboxd/outboxd/sinks/nats"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// brokerTypes are the built-in sink types that link a broker client. A new
// one is one line here.
func brokerTypes() []registry.Type {
	return []registry.Type{
		{Name: nats.Type, New: nats.New, Options: nats.DefaultOptions(),
			Doc: "Publishes each message to a NATS JetStream stream, the delivery id <sink>/<dedup key> as its message id"},
		{Name: rabbitmq.Type, New: rabbitmq.New, Options: rabbitmq.DefaultOptions(),
			Doc: "Publishes each message to a RabbitMQ exchange with publisher confirms"},
		{Name: kafka.Type, New: kafka.New, Options: kafka.DefaultOptions(),
			Doc: "Produces each message as one Kafka record, idempotently, acknowledged by all in-sync replicas"},
	}
}

// Types are the sink types of every outboxd build, in the order the
// documentation lists them.
func Types() []registry.Type { return append(nobrokers.Types(), brokerTypes()...) }

// Register registers Types; call it once, before cmd.Main.
func Register() {
	nobrokers.Register()
	for _, t := range brokerTypes() {
		registry.Register(t)
	}
}
