// Package rabbitmq is the outboxd sink that publishes each message to a
// RabbitMQ exchange with publisher confirms
// (github.com/rabbitmq/amqp091-go). [Type] defines it as the sink type
// "rabbitmq", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  order-events:
//	    type: rabbitmq
//	    options:
//	      url: amqp://rabbitmq.internal:5672/orders   # required, amqp:// or amqps://
//	      username: outboxd                           # or credentials in the URL
//	      password: ${RABBITMQ_PASSWORD}
//	      exchange: orders                            # must exist; empty is the default exchange
//	      routing_key: orders.{{.Sink}}               # a template, see below
//	      timeout: 10s                                # wait for the confirm, default sinks.DefaultPublishTimeout
//	      connect_timeout: 5s                         # default sinks.DefaultConnectTimeout
//	      max_in_flight: 256                          # publishes awaiting a confirm, default sinks.DefaultMaxInFlight
//
// The sink declares nothing: exchanges, queues and bindings belong to the
// rest of your RabbitMQ setup.
//
// # Routing key
//
// The routing key is a Go text/template over [sinks.AddressData]:
// {{.Sink}}, {{.OrderingKey}}, {{.DedupKey}} and {{.Headers.name}}; for
// example "orders.{{or .OrderingKey \"unordered\"}}". A template that
// fails for a message (a header it lacks) is a permanent failure of that
// message.
//
// # The message
//
// The body is exactly the JSON that was enqueued, with content-type
// application/json, delivery mode persistent, message-id set to the
// message's delivery id, "<sink>/<dedup key>" (sink.Delivery.DeliveryID:
// unique across the sinks and route targets of an outbox), and timestamp to the time it was enqueued. The headers are the
// row's own (what the producer attached) and the W3C traceparent and
// tracestate of the relay's delivery span, so a consumer that extracts them
// continues the producer's trace.
//
// # At least once, one message id
//
// A relay that dies after the broker confirmed a message but before the row
// was marked sent leaves the row to be delivered again, and RabbitMQ does
// not deduplicate: the queue then holds two copies. Both carry the same
// message-id, so a consumer that remembers the ids it processed drops the
// second.
//
// # Outcomes
//
// The broker's confirm (basic.ack) is the success. Every message is
// published mandatory, so a message no queue is bound for comes back
// (basic.return) and fails permanently instead of vanishing. Failures map
// like this:
//
//	unroutable, a missing exchange (404), access refused (403),
//	precondition failed (406)                           permanent (dead-lettered)
//	broker blocks publishing (memory or disk alarm),
//	message refused with basic.nack (a full queue with
//	overflow reject-publish)                            paused for DefaultRefusedPause, no attempt spent
//	no confirm in time, connection lost or refused      retried
//
// # Connection
//
// A sink instance holds one connection and one channel in confirm mode,
// shared by its deliveries and dialed at the first delivery, so a broker
// that is down at start-up only delays delivery. When the connection or
// channel closes the sink dials again, with exponential backoff between
// failed dials (see [sinks.Connection]); meanwhile deliveries fail at once
// and wait in the outbox for their retry. Dial and authentication failures
// are retried, not dead-lettered. Heartbeats every 10 seconds notice a
// broker that vanished without closing the connection. At most
// max_in_flight publishes wait for their confirm at once. [Sink.Close]
// closes the connection.
//
// Passwords, in the URL or in options, never appear in errors or logs.
package rabbitmq
