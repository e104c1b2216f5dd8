// Package teams is the outboxd sink that posts each message to a
// Microsoft Teams channel or chat as an Adaptive Card, through a
// Workflows webhook (the Workflows app's "When a Teams webhook request is
// received" trigger, which replaced Office 365 connectors' incoming
// webhooks). [Type] defines it as the sink type "teams", which the outboxd
// binary registers.
//
// # Configuration
//
//	sinks:
//	  ops-teams:
//	    type: teams
//	    options:
//	      url: ${TEAMS_WEBHOOK_URL}   # required; its sig parameter is the credential
//	      timeout: 10s                # per request, default DefaultTimeout
//	      allow_private: true         # default DefaultAllowPrivate; false refuses private addresses
//
// The URL is a secret: errors, logs and traces never show it.
//
// # The payload
//
// A message is {"title", "text"}, which the sink lays out as an Adaptive
// Card (version [CardVersion]: the title a bold TextBlock, the text a
// wrapped one, in which Teams renders a subset of Markdown), or {"card"},
// a whole Adaptive Card of the producer's own ({"type": "AdaptiveCard",
// "version", "body", ...}) posted as it is. Either way the request is
//
//	{"type": "message", "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null, "content": <card>}]}
//
// Routes render into [Shape]'s fields title, text and card; a target
// without a template posts the event's type and key as the title and its
// data as the text.
//
// # Outcomes
//
// A Workflows webhook answers 202 Accepted when the flow has been started,
// before it posts the card: a card Teams then refuses fails inside the
// flow (its run history shows it), after the sink counted the message
// delivered. The sink therefore refuses, permanently and before any
// request, what Teams would refuse: a payload that is neither
// {"title", "text"} nor {"card"}, a card that is not of type AdaptiveCard
// or has no version, a message over Teams' 28 KB ([MaxMessageBytes]).
//
// Responses are classified by [sinks.ClassifyResponse]: 2xx is delivered;
// 429 (Power Automate's throttling, and Teams' when a webhook posts more
// than four messages a second) comes with Retry-After in seconds and
// pauses the sink that long without spending an attempt; other 4xx (401
// for a wrong or revoked sig, 404 for a deleted flow, 400 for a body the
// trigger refuses, 413 for a message too large) are permanent; 5xx,
// timeouts and connection errors are retried.
//
// # Rate limit
//
// Microsoft allows one Teams webhook four requests a second and the
// workflow's Teams connector 100 calls a minute; the default rate limit,
// [DefaultRate] per [DefaultPer] with a burst of [DefaultBurst], stays
// under both. One sink posts to one webhook, so the limit is the sink's
// (no per-key limit).
//
// # Exactly once
//
// Teams has no idempotency key and a webhook cannot read the channel, so
// delivery is at least once: an attempt whose answer was lost (a timeout
// after Teams accepted it, a relay that crashed) is posted again. Every
// request carries the delivery id, "<sink>/<dedup key>", in the
// [HeaderDeliveryID] header, the same on every attempt: a flow can
// de-duplicate on it (triggerOutputs()['headers']['Idempotency-Key']), or a
// proxy in front of the webhook.
package teams
