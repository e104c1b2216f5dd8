// Package slack is the `slack` sink: it posts outbox messages to Slack with
// github.com/slack-go/slack, through a bot token (chat.postMessage, the
// default) or an incoming webhook. [Type] defines it as the sink type
// "slack", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  alerts:
//	    type: slack
//	    options:
//	      token: ${SLACK_BOT_TOKEN}   # or webhook_url: ${SLACK_WEBHOOK_URL}
//	      channel: "#alerts"          # default channel: a name or an ID (C0123ABCD); a payload may name another
//	      username: outboxd           # optional
//	      icon_emoji: ":mailbox:"     # optional
//	      dedupe: true                # default in token mode; see below
//	      api_url: https://slack.com/api/  # default; for tests and proxies
//	      allowed_channels: ["#deploys", C0OPS]  # optional: see "What a payload may do"
//	      escape_mentions: true       # optional: mentions are shown as text
//
// Exactly one of token and webhook_url is set. Channels (option and
// payload) are IDs or names ("#alerts", or "alerts": anything that is not
// upper-case letters and digits is a name). With dedupe on, "@user" is
// refused: a DM's history can only be read by the DM's ID (D0123ABCD).
//
// # Payload
//
// A message is a JSON object with the fields of [Payload]; text or blocks
// (or both) must be set. A plain string enqueued by a producer is stored by
// the core as {"text": ...}, so
//
//	core.Enqueue(ctx, tx, core.Message{Sink: "alerts", DedupKey: "order-42", Payload: "Order 42 shipped"})
//
// posts "Order 42 shipped" to the default channel. Other shapes:
//
//	{"text": "Deploy finished", "channel": "C0DEPLOYS"}
//	{"text": "Build 17 failed", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*Build 17* failed"}}]}
//	{"text": "Fixed in 1.2.3", "thread_ts": "1700000000.000100"}
//	{"text": "See https://example.com", "unfurl_links": false}
//
// With blocks, text is the notification fallback. A payload the sink cannot
// send (not such an object, an unknown field, no text and no blocks, blocks
// that are not Block Kit) fails permanently: the row is dead-lettered at
// once.
//
// # What a payload may do
//
// Whoever can enqueue to the sink writes as the bot: a payload's channel
// posts to any channel the token (or a legacy webhook) reaches, and its
// text and blocks may mention <!channel>, <!here>, <!everyone>, user groups
// (<!subteam^ID>) and users (<@U0123>), notifying all of them. That is the
// default, for producers that are your own code. Two options restrict it:
//
//   - allowed_channels lists the channels (IDs, or names in any case, with
//     or without '#') a payload's channel may name besides the channel
//     option; a payload naming another fails permanently and nothing is
//     posted. List only the channel option's channel to forbid redirects.
//   - escape_mentions: true shows every mention as text: '<' of <!...> and
//     <@...> sequences in the text and in mrkdwn text objects is sent as
//     &lt; (date tokens, <!date^...>, are shown as text too), plain
//     @channel, @here and @everyone get an invisible word joiner after the
//     '@', and rich_text broadcast, user and usergroup elements become text
//     elements naming whom they would have mentioned.
//
// # Outcomes
//
// A post Slack accepts records the receipt {"channel": "C0123ABCD", "ts":
// "1700000000.000100"} on the row. Slack's ok:false errors that no retry can
// fix (channel_not_found, not_in_channel, invalid_auth, account_inactive,
// invalid_blocks, msg_too_long, is_archived, no_text, token_revoked, ...)
// are permanent; HTTP 429 asks the relay to wait for its Retry-After (the
// whole sink pauses, cluster-wide); 5xx, timeouts, connection errors and
// unknown error codes are retried with backoff.
//
// The default rate limit is Slack's documented one message per second
// ([DefaultRate] per [DefaultPer]) for the sink as a whole; Slack counts it
// per channel, so a sink posting to several channels sets
// rate_limit: {rate: 1, per: 1s, per_key: true}: the sink names each
// delivery's channel ([Sink.RateKey]) and the relay spaces the posts
// of each channel on its own.
//
// # Threads
//
// A row of a thread (published events sharing a thread_key, see
// docs/events.md) carries the receipt of the thread's first message in
// sink.Delivery.ThreadRoot: the sink posts it as a reply in that thread, in
// the first message's channel, and records thread_ts in its receipt. A
// payload with "update_root": true (a route's update_root) also edits the
// first message to the reply's text and blocks with chat.update, again on
// a retry that finds the reply already posted. Routes render the payload
// from [Sink.TemplateShape]'s fields: text, blocks and channel. Threads need
// a bot token: an incoming webhook answers no ts.
//
// # Exactly once
//
// Slack has no idempotency key. Every post therefore carries message
// metadata with event_type [MetadataEventType] and an event_payload holding
// the sink name, the row's dedup key and its id. When a row is attempted
// again after an attempt whose outcome is unknown (the previous relay lost
// its lease, or the attempt failed after Slack may have accepted it), the
// sink first reads the channel's history since the row was created
// (conversations.history with include_all_metadata, or conversations.replies
// for a thread reply) and, when it finds its own earlier post, records that
// post's receipt instead of posting again. So a relay that crashes between
// Slack's answer and the database write does not produce a second message.
// Set dedupe: false to post without looking.
//
// conversations.history takes only IDs, so a channel given by name is
// resolved when (and only when) a retry needs the check: from the channel ID
// Slack answered an earlier chat.postMessage of this sink with, or else with
// conversations.list (public and private, unarchived channels,
// [ChannelListPageSize] per page, at most [ChannelListMaxPages] pages). The
// sink caches name -> ID, and runs one scan at a time, so that the burst of
// retries after a crash costs one scan. A transient failure of the scan (5xx,
// 429, timeout) is retried like any other. A name the scan cannot resolve
// (not listed: unknown, archived, beyond the bound; or the token lacks
// channels:read/groups:read) does not fail the row, since the post itself
// may work: the sink posts without the check, logs a warning and records the
// reason in the receipt under [ReceiptDedupeSkipped]. Such a row may then be
// posted twice; if the channel does not exist, the post fails permanently
// with channel_not_found.
//
// # Scopes
//
// The bot token needs chat:write; with dedupe (the default) also
// channels:history and groups:history (private channels); with channel
// names and dedupe also channels:read and groups:read.
//
// Incoming webhooks can neither attach metadata nor read history: in webhook
// mode delivery is at-least-once.
package slack
