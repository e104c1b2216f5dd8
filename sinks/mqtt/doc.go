// Package mqtt is the outboxd sink that publishes each message to an MQTT
// 3.1.1 broker with QoS 1 (github.com/eclipse/paho.mqtt.golang). [Type]
// defines it as the sink type "mqtt", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  device-events:
//	    type: mqtt
//	    options:
//	      url: tcp://127.0.0.1:1883         # required; ssl://, ws://, wss:// too
//	      topic: devices/{{.Sink}}           # required; a template, see below
//	      qos: 1                             # 0 or 1, default DefaultQoS
//	      retain: false                      # default false
//	      client_id: ""                      # default outboxd-<sink>-<host>-<pid>
//	      timeout: 10s                       # wait for the PUBACK, default sinks.DefaultPublishTimeout
//	      connect_timeout: 5s                # default sinks.DefaultConnectTimeout
//	      max_in_flight: 256                 # publishes awaiting a PUBACK, default sinks.DefaultMaxInFlight
//	      username: outboxd
//	      password: ${MQTT_PASSWORD}         # never shown
//
// # Topic
//
// The topic is a Go text/template over [sinks.AddressData]: {{.Sink}},
// {{.OrderingKey}}, {{.DedupKey}} and {{.Headers.name}}, e.g.
// "devices/{{or .OrderingKey \"unordered\"}}". A rendered topic that is
// empty, holds a wildcard (+ or #) or NUL, starts with $ (the broker's own
// topics), or names a header the message lacks is a permanent failure of
// that message.
//
// # The message
//
// MQTT 3.1.1 has no headers, so each message's payload is an [Envelope],
// {"id", "headers", "payload"}: the delivery id ("<sink>/<dedup key>",
// [sink.Delivery.DeliveryID]), the row's headers with the W3C traceparent
// and tracestate of the relay's delivery span, and the JSON that was
// enqueued (or that the route's body template rendered), compacted. A payload that
// is not JSON is a permanent failure.
//
// # At least once
//
// With qos 1 a publish counts as delivered when the broker's PUBACK
// arrives; with qos 0 when it is written to the connection (a broker that
// goes away then loses it). MQTT 3.1.1 has no de-duplication of a
// publisher's messages: a relay that dies after the broker took a message
// but before the row was marked sent publishes it again, and a subscriber
// receives it twice. Subscribers de-duplicate on the envelope's id. QoS 2
// is refused: its exactly once covers one hop (publisher to broker) and
// needs a persistent session, which a redelivery by another relay would not
// share. The sink speaks MQTT 3.1.1 only; MQTT 5's user properties are not
// used.
//
// # Limits and Retry-After
//
// MQTT has no request rate limit nor Retry-After, so the sink declares no
// default rate_limit; max_in_flight bounds the publishes awaiting their
// PUBACK. A broker cannot refuse a publish in MQTT 3.1.1 (one that denies it
// by ACL still acknowledges it, or drops the connection): such messages are
// lost to the broker's policy, not dead-lettered.
//
// # Outcomes
//
//	topic invalid or unrenderable, payload not JSON         permanent (dead-lettered)
//	no PUBACK within timeout, connection refused or lost    retried
//
// # Connection
//
// A sink instance holds one connection with a clean session, shared by its
// deliveries and dialed at the first delivery, so a broker that is down at
// start-up only delays delivery. When the connection breaks the sink dials
// again, with exponential backoff between failed dials (see
// [sinks.Connection]); meanwhile deliveries fail at once and wait in the
// outbox for their retry. The delivery's deadline bounds the wait for the
// PUBACK. [Sink.Close] disconnects. Passwords, in the URL or in options,
// never appear in errors or logs. Two connections with one client id take
// the session from each other, so an explicit client_id must differ
// between relays (client_id: outboxd-${HOSTNAME}).
package mqtt
