// Package discord is the `discord` sink: it posts outbox messages to a
// Discord channel, or a thread of it, through a webhook (Execute Webhook,
// POST <webhook URL>?wait=true), with the standard library's HTTP client
// behind the shared address guard (package sinks). [Type] defines it as
// the sink type "discord", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  ops-discord:
//	    type: discord
//	    options:
//	      webhook_url: ${DISCORD_WEBHOOK_URL}  # required, a secret: its path holds the token
//	      username: outboxd                    # optional; default the webhook's name
//	      avatar_url: https://example.com/a.png  # optional; default the webhook's avatar
//	      thread_id: "1234567890"              # optional: post into this thread
//	      allowed_mentions: []                 # default: no mention pings anyone
//	      timeout: 10s                         # per request, default DefaultTimeout
//	      allow_private: false                 # default; true for a proxy or a test server
//
// webhook_url is Discord's https://discord.com/api/webhooks/<id>/<token>
// (the channel's Integrations → Webhooks → Copy Webhook URL), without a
// query. It is a confschema.Secret: `outboxd config show` redacts it, and
// the sink's errors and spans never hold it (spans record the path as
// /REDACTED). allowed_mentions lists the mention types Discord may turn
// into pings, of users, roles and everyone; by default none, so a
// producer's "@everyone" shows as text and pings nobody. A payload cannot
// widen it.
//
// # Payload
//
// A message is a JSON object with the fields of [Payload]: content (or
// text, its other name, which a plain string enqueued by a producer is
// stored under) or embeds (or both) must be set:
//
//	{"content": "Deploy 42 finished"}
//	{"embeds": [{"title": "Build 17 failed", "description": "see the log", "color": 15158332}]}
//	{"content": "Fixed in 1.2.3", "thread_id": "1234567890"}
//	{"content": "Incident 7 opened", "thread_name": "Incident 7"}
//
// The sink checks Discord's documented bounds before sending (content of
// at most [MaxContentRunes] characters, at most [MaxEmbeds] embeds, a
// username of at most [MaxUsernameRunes] characters without "discord" or
// "clyde", a thread_name of at most [MaxThreadName]); a payload beyond them,
// with an unknown field, or with neither content nor embeds fails
// permanently: the row is dead-lettered at once, nothing is sent.
//
// # Threads
//
// thread_id posts into an existing thread of the webhook's channel;
// thread_name, in a forum or media channel, creates a thread of that name
// with the message as its first. Published events sharing a thread_key
// (docs/events.md) form one thread: the first row's receipt records the
// thread it created or posted into, and the later rows post into it (their
// thread_name is then not used). With update_root (a route target's
// update_root: true), a later row also edits the thread's first message to
// its content and embeds, before it posts. Routes render the payload from
// [Shape]'s fields.
//
// # Outcomes
//
// A message Discord accepts records the receipt [Receipt] ({"id",
// "channel_id", "thread_id"}) on the row. The answers:
//
//	2xx                       delivered
//	429                       sink.RetryAfter: the wait of the body's retry_after (seconds with a
//	                          fraction), else X-RateLimit-Reset-After, else Retry-After, else
//	                          DefaultRetryAfter; no attempt spent, the webhook paused cluster-wide
//	400 (50006 empty message, 50035 invalid form body, 220001-220003 thread errors ...),
//	401, 403, 404 (10015 unknown webhook), other 4xx
//	                          permanent: the same request cannot succeed
//	5xx, timeouts, connection errors
//	                          retried with backoff
//
// # Rate limits
//
// Discord limits each webhook on its own and announces its bucket in every
// answer (X-RateLimit-Limit, -Remaining, -Reset-After, -Bucket). The sink's
// default rate limit is [DefaultRate] per [DefaultPer], burst
// [DefaultBurst], per webhook (its rate key, [Sink.RateKey], is the
// webhook's id, the public part of its URL). The sink also follows the
// headers: while the bucket Discord announced is empty it sends nothing
// and asks the relay to come back when the bucket refills
// (sink.RetryAfter), since Discord counts each 429 toward the invalid
// requests for which Cloudflare bans an address.
//
// # Exactly once
//
// Discord's webhooks take no idempotency key and cannot list the channel's
// messages, so no receiver-side check is possible: delivery is at least
// once. A message is posted twice only when an attempt's outcome is
// unknown: the relay died, or the request timed out, after Discord had
// accepted it. With ?wait=true Discord answers only once the message is
// stored, so every answered attempt is certain.
package discord
