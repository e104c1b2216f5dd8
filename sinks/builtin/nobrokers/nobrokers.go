// Package nobrokers registers the built-in sink types that need no broker
// client: log, discard, Slack, webhooks, tenants' destinations and email. A custom build that
// imports it instead of package builtin leaves the NATS, RabbitMQ and
// Kafka clients out of its binary.
package nobrokers

import (
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/destinations"
	"github.com/outboxd/outboxd/sinks/email"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// Types are the built-in sink types without a broker client. A new one is
// one line here: its package's Type, New, DefaultOptions and, if it has
// one, Shape (see package sinks for the shape).
func Types() []registry.Type {
	return []registry.Type{
		registry.Log,
		registry.Discard,
		{Name: slack.Type, New: slack.New, Options: slack.DefaultOptions(), Shape: slack.Shape(),
			Doc: "Posts each message to Slack, with a bot token (exactly once) or an incoming webhook"},
		{Name: webhook.Type, New: webhook.New, Options: webhook.DefaultOptions(), Shape: webhook.Shape(),
			Doc: "POSTs each message to an HTTP endpoint, signed the Standard Webhooks way"},
		{Name: email.Type, New: email.New, Options: email.DefaultOptions(), Shape: email.Shape(),
			Doc: "Sends each message as one mail over SMTP"},
		destinationsType(),
	}
}

// destinationsType is the destinations sink's type, with its shape.
func destinationsType() registry.Type {
	t := registry.Define(destinations.Type, "POSTs each row to the tenant's destination it names, signed the Standard Webhooks way with the destination's secrets",
		destinations.DefaultOptions(), destinations.New)
	t.Shape = destinations.Shape()
	return t
}

// Register registers Types; call it once, before cmd.Main.
func Register() {
	for _, t := range Types() {
		registry.Register(t)
	}
}
