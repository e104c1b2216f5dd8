package cmd

import (
	"maps"
	"slices"
	"strings"

	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/email"
	"github.com/outboxd/outboxd/sinks/kafka"
	"github.com/outboxd/outboxd/sinks/nats"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// builtinSinkTypes are the sink types of every outboxd build. They are
// registered here and nowhere else, when package cmd is initialised; a
// custom build registers its own types in its main, before calling Main.
// A new built-in type is one line here: its package's Type, New and
// DefaultOptions (see package sinks for the shape).
var builtinSinkTypes = []registry.Type{
	registry.Log,
	registry.Discard,
	{Name: slack.Type, New: slack.New, Options: slack.DefaultOptions(),
		Doc: "Posts each message to Slack, with a bot token (exactly once) or an incoming webhook"},
	{Name: webhook.Type, New: webhook.New, Options: webhook.DefaultOptions(),
		Doc: "POSTs each message to an HTTP endpoint, signed the Standard Webhooks way"},
	{Name: email.Type, New: email.New, Options: email.DefaultOptions(),
		Doc: "Sends each message as one mail over SMTP"},
	{Name: nats.Type, New: nats.New, Options: nats.DefaultOptions(),
		Doc: "Publishes each message to a NATS JetStream stream, the dedup key as its message id"},
	{Name: rabbitmq.Type, New: rabbitmq.New, Options: rabbitmq.DefaultOptions(),
		Doc: "Publishes each message to a RabbitMQ exchange with publisher confirms"},
	{Name: kafka.Type, New: kafka.New, Options: kafka.DefaultOptions(),
		Doc: "Produces each message as one Kafka record, idempotently, acknowledged by all in-sync replicas"},
}

func init() {
	for _, t := range builtinSinkTypes {
		registry.RegisterType(t)
	}
}

// checkSink reports a sink name the configuration does not know: a row for
// it would never be delivered.
func checkSink(cfg *Config, name string) error {
	if _, ok := cfg.Sinks[name]; ok {
		return nil
	}
	return badInputf("unknown sink %q (configured sinks: %s)", name, sinkList(cfg))
}

func sinkList(cfg *Config) string {
	names := slices.Sorted(maps.Keys(cfg.Sinks))
	if len(names) == 0 {
		return "none; add one under sinks: in the configuration"
	}
	return strings.Join(names, ", ")
}
