// Package nobrokers registers the built-in sink types that need no broker
// client: log, discard, the chat and incident notifiers (Slack, Discord,
// PagerDuty, Teams, Mattermost), webhooks, email and tenants'
// destinations.
// A custom build that imports it instead of package builtin leaves the
// NATS, RabbitMQ, Kafka, Redis, MQTT and Pub/Sub clients out of its binary.
package nobrokers

import (
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/destinations"
	"github.com/outboxd/outboxd/sinks/discord"
	"github.com/outboxd/outboxd/sinks/email"
	"github.com/outboxd/outboxd/sinks/mattermost"
	"github.com/outboxd/outboxd/sinks/pagerduty"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/teams"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// Types are the built-in sink types without a broker client, in the order
// the documentation lists them. A new one is one line here: its package's
// Type.
func Types() []registry.Type {
	return []registry.Type{
		registry.Log,
		registry.Discard,
		slack.Type,
		webhook.Type,
		email.Type,
		destinations.Type,
		discord.Type,
		teams.Type,
		mattermost.Type,
		pagerduty.Type,
	}
}

// Register registers Types; call it once, before cmd.Main.
func Register() {
	for _, t := range Types() {
		registry.Register(t)
	}
}
