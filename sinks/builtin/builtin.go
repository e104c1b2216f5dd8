// Package builtin registers the sink types of the stock outboxd binary:
// the ones of package nobrokers, and the broker sinks (NATS JetStream,
// RabbitMQ, Kafka, Redis Streams, MQTT, Google Cloud Pub/Sub). The
// binary's main calls Register before cmd.Main; a custom build calls it
// too, or nobrokers.Register, and registers its own types beside them.
package builtin

import (
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/builtin/nobrokers"
	"github.com/outboxd/outboxd/sinks/kafka"
	"github.com/outboxd/outboxd/sinks/mqtt"
	"github.com/outboxd/outboxd/sinks/nats"
	"github.com/outboxd/outboxd/sinks/pubsub"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
	"github.com/outboxd/outboxd/sinks/redis"
)

// brokerTypes are the built-in sink types that link a broker client. A new
// one is one line here: its package's Type.
func brokerTypes() []registry.Type {
	return []registry.Type{nats.Type, rabbitmq.Type, kafka.Type, redis.Type, mqtt.Type, pubsub.Type}
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
