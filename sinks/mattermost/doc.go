// Package mattermost is the outboxd sink that posts each message to a
// Mattermost channel through an incoming webhook, with Mattermost's
// Slack-compatible fields. [Type] defines it as the sink type
// "mattermost", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  chat:
//	    type: mattermost
//	    options:
//	      url: ${MATTERMOST_WEBHOOK_URL}      # required, https://<server>/hooks/<key>; the key is the credential
//	      channel: town-square                # default: the webhook's channel; a payload's channel overrides it
//	      username: outboxd                   # default: the webhook's (needs EnablePostUsernameOverride)
//	      icon_url: https://example.com/i.png # default: the webhook's (needs EnablePostIconOverride)
//	      timeout: 10s                        # per request, default DefaultTimeout
//	      allow_private: true                 # default DefaultAllowPrivate; false refuses private addresses
//
// The URL is a secret: errors, logs and traces never show it.
//
// # The payload
//
// A message is {"text", "attachments", "channel"} ([Payload]): text in
// Mattermost's Markdown, Slack-style attachments ([{"fallback", "color",
// "title", "text", "fields", ...}]) passed on as they are, and a channel
// (its name in URLs, or @user for a direct message) instead of the
// sink's. One of text and attachments is required. Routes render into
// [Shape]'s fields text, attachments and channel; a target without a
// template posts the event's type and key in bold and its data as a code
// block. Mattermost splits a text longer than its post size (16383
// characters by default) into several posts.
//
// # Outcomes
//
// Mattermost answers an accepted post 200 with the body "ok". A success
// with another body (the URL leads to some other application) fails
// permanently, as nothing was posted and the same URL cannot do better.
// Other answers are classified by [sinks.ClassifyResponse]: 429, from
// Mattermost's rate limiter, comes with Retry-After in seconds (and
// X-RateLimit-Limit, -Remaining, -Reset) and pauses the sink that long
// without spending an attempt; 4xx are permanent (400 for an unknown or
// deleted hook, a body it cannot parse or a post without text or
// attachments, 403 for a channel a locked hook may not post to, 404 for an
// unknown channel); 5xx (501 while an administrator has turned incoming
// webhooks off), timeouts and connection errors are retried. A payload
// that Mattermost would refuse (neither text nor attachments, attachments
// that are not a list of objects, unknown fields) fails permanently before
// any request.
//
// # Rate limit
//
// Mattermost's rate limiter, when on, allows each client address 10
// requests a second with a burst of 100 (RateLimitSettings); the default
// rate limit, [DefaultRate] per [DefaultPer] with a burst of
// [DefaultBurst], keeps to it. It limits by address, not by channel, so
// the limit is the sink's (no per-key limit); give the sinks of one
// server a share each when several post to it.
//
// # Exactly once
//
// Incoming webhooks have no idempotency key and cannot read the channel,
// so delivery is at least once: an attempt whose answer was lost (a
// timeout after Mattermost posted, a relay that crashed) is posted again.
// Every post carries the delivery id, "<sink>/<dedup key>", the same on
// every attempt, in its props under [PropDeliveryID], where an
// integration reading posts through Mattermost's API can recognise a
// duplicate.
package mattermost
