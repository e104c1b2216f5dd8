// Package nats is the outboxd sink that publishes each message to a NATS
// JetStream stream (github.com/nats-io/nats.go). [Type] defines it as the
// sink type "nats", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  order-events:
//	    type: nats
//	    options:
//	      url: nats://127.0.0.1:4222          # required; comma-separate a cluster's servers
//	      subject: orders.{{.Sink}}            # required; a template, see below
//	      stream: ORDERS                       # optional: refuse a publish another stream would store
//	      timeout: 10s                         # wait for the stream's ack, default sinks.DefaultPublishTimeout
//	      connect_timeout: 5s                  # default sinks.DefaultConnectTimeout
//	      max_in_flight: 256                   # publishes awaiting an ack, default sinks.DefaultMaxInFlight
//	      username: outboxd                    # or token, credentials_file, nkey_seed_file
//	      password: ${NATS_PASSWORD}
//
// The stream itself is not created by the sink: declare it (its subjects,
// retention and duplicate window) the way the rest of your NATS setup is
// declared.
//
// # Subject
//
// The subject is a Go text/template over [sinks.AddressData]:
// {{.Sink}}, {{.OrderingKey}}, {{.DedupKey}} and {{.Headers.name}}. For
// example "orders.{{or .OrderingKey \"unordered\"}}" gives each ordering
// key a subject of its own; the relay delivers one key's messages one at a
// time, so they reach that subject in order. A rendered subject that is
// empty, holds white space or has an empty or wildcard token is a
// permanent failure of that message.
//
// # The message
//
// The data is exactly the JSON that was enqueued. The headers are the
// row's own (what the producer attached), the W3C traceparent and
// tracestate of the relay's delivery span (so a consumer that extracts
// them continues the producer's trace), and Nats-Msg-Id set to the
// message's delivery id, "<sink>/<dedup key>" (sink.Delivery.DeliveryID:
// unique across the sinks and route targets of an outbox, so two sinks
// publishing into one stream never drop each other's messages).
//
// # Exactly once into the stream
//
// A relay that dies after the stream stored a message but before the row
// was marked sent leaves the row to be delivered again. The second publish
// carries the same Nats-Msg-Id, and the stream drops it when it comes
// within the stream's duplicate window (StreamConfig.Duplicates, two
// minutes by default): the stream ends with the message once. Keep the
// window longer than the relay's lease plus its retry backoff if redelivery
// must never add a copy. The acknowledgement of a dropped duplicate counts
// as success; the row's receipt records the stream, the sequence and
// "duplicate": true.
//
// # Outcomes
//
// The stream's acknowledgement is the success. Failures map like this:
//
//	no stream covers the subject, the stream named by
//	the stream option does not store it, a message over
//	the server's max_payload, a refused permission         permanent (dead-lettered)
//	stream full (a limit with discard: new), server short
//	of resources                                            paused for DefaultStreamFullPause, no attempt spent
//	ack timeout, connection lost or refused, anything else  retried
//
// "No stream covers the subject" is decided by asking the server after a
// publish that no stream answered, not from the missing answer alone.
//
// # Connection
//
// A sink instance holds one connection, shared by its deliveries and
// dialed at the first delivery, so a server that is down at start-up only
// delays delivery. When the connection breaks the sink dials again, with
// exponential backoff between failed dials (see [sinks.Connection]);
// meanwhile deliveries fail at once and wait in the outbox for their retry.
// Dial and authentication failures are retried, not dead-lettered: fix the
// configuration and the messages go out. At most max_in_flight publishes
// wait for their acknowledgement at once. [Sink.Close] closes the
// connection.
//
// Passwords and tokens, in the URL or in options, never appear in errors or
// logs.
package nats
