// Package redis is the outboxd sink that adds each message to a Redis
// stream with XADD (github.com/redis/go-redis/v9), exactly once per
// delivery id within a de-duplication window. [Type] defines it as the
// sink type "redis", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  order-events:
//	    type: redis
//	    options:
//	      url: redis://127.0.0.1:6379/0      # required; rediss:// for TLS
//	      stream: orders:{{.Sink}}            # required; a template, see below
//	      maxlen: 100000                      # trim to about this many entries, default 0 (keep all)
//	      fields:                             # extra fields, each a template; default none
//	        tenant: '{{index .Headers "x-tenant"}}'
//	      dedup_window: 24h                   # default DefaultDedupWindow
//	      dedup_prefix: "outboxd:dedup:"      # default DefaultDedupPrefix
//	      timeout: 10s                        # one XADD's wait, default sinks.DefaultPublishTimeout
//	      connect_timeout: 5s                 # default sinks.DefaultConnectTimeout
//	      max_in_flight: 256                  # default sinks.DefaultMaxInFlight
//	      username: outboxd                   # optional, an ACL user
//	      password: ${REDIS_PASSWORD}         # optional; never shown
//
// # Stream
//
// The stream is a Go text/template over [sinks.AddressData]: {{.Sink}},
// {{.OrderingKey}}, {{.DedupKey}} and {{.Headers.name}}, e.g.
// "orders:{{or .OrderingKey \"unordered\"}}" for a stream per ordering key
// (the relay delivers one key's messages one at a time, so they reach its
// stream in order). A template that renders an empty key, or names a header
// the message lacks, fails that message permanently; so does a key that
// holds something other than a stream (WRONGTYPE).
//
// # The entry
//
// Each entry has the fields id (the delivery id, "<sink>/<dedup key>",
// [sink.Delivery.DeliveryID]), payload (exactly the JSON that was
// enqueued, or what the route's body template rendered) and headers (a JSON
// object: the row's own headers and the W3C traceparent and tracestate of
// the relay's delivery span), then the fields of the fields option in name
// order. The entry id is the server's (XADD *); a sent row's receipt
// records the stream and that id.
//
// # Exactly once within the window
//
// One Lua script does the whole delivery atomically on the server: when
// the key <dedup_prefix><delivery id> exists it returns the entry id it
// holds and adds nothing; otherwise it adds the entry and sets the key to
// the new entry id, expiring after dedup_window. A relay that died after
// the entry was added but before the row was marked sent delivers the row
// again; the second run finds the key and the stream keeps one entry (the
// receipt says "duplicate": true). A redelivery after the window adds a
// second entry with the same id field, for the consumer to drop. Keep the
// window longer than the relay's lease plus its retry backoff. The keys
// cost about 100 bytes each for the window; the script's keys must live on
// one server, so Redis Cluster is not supported.
//
// # Limits and Retry-After
//
// Redis documents no request rate limit, so the sink declares no default
// rate_limit, and it has no Retry-After. A server out of memory (maxmemory
// with noeviction) pauses the sink for DefaultOOMPause without spending an
// attempt.
//
// # Outcomes
//
//	stream renders empty or fails, WRONGTYPE, NOPERM       permanent (dead-lettered)
//	OOM                                                      paused for DefaultOOMPause, no attempt spent
//	timeout, connection refused or lost, anything else      retried
//
// # Connection
//
// A sink instance holds one client (go-redis, a pool of at most
// max_in_flight connections), made and pinged at the first delivery, so a
// server that is down at start-up only delays delivery. While the first
// ping fails the sink tries again with exponential backoff (see
// [sinks.Connection]); afterwards the client replaces a broken connection
// on the next command. The client retries nothing itself: a failed
// delivery goes back to the outbox and the relay's retry policy applies.
// The delivery's deadline bounds every command. [Sink.Close] closes the
// client. Passwords, in the URL or in options, never appear in errors or
// logs.
package redis
