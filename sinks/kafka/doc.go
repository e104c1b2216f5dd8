// Package kafka is the outboxd sink that produces each message as one
// Kafka record (github.com/twmb/franz-go). [Type] defines it as the sink
// type "kafka", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  order-events:
//	    type: kafka
//	    options:
//	      brokers: [kafka-1:9092, kafka-2:9092]   # required, seed brokers
//	      topic: orders                           # required; a template, see below; must exist
//	      timeout: 10s                            # to the acknowledgement, default sinks.DefaultPublishTimeout
//	      connect_timeout: 5s                     # default sinks.DefaultConnectTimeout
//	      max_in_flight: 256                      # records buffered or unacknowledged, default sinks.DefaultMaxInFlight
//	      tls: true                               # TLS with the system's roots
//	      sasl_mechanism: scram-sha-512           # plain, scram-sha-256 or scram-sha-512
//	      username: outboxd
//	      password: ${KAFKA_PASSWORD}
//
// # Topic
//
// The topic is a Go text/template over [sinks.AddressData]: {{.Sink}},
// {{.OrderingKey}}, {{.DedupKey}} and {{.Headers.name}}. A rendered topic
// that is not a valid Kafka topic name is a permanent failure of that
// message; a topic that does not exist is permanent too (the sink never
// creates topics).
//
// # The record
//
// The value is exactly the JSON that was enqueued. The key is the row's
// ordering key when it has one, so all of one key's records land in one
// partition, and the relay delivers them one at a time, so they are in
// order there; without an ordering key the key is the dedup key. The
// headers are outbox-delivery-id ([DeliveryIDHeader]) with the message's
// delivery id, "<sink>/<dedup key>" (sink.Delivery.DeliveryID: unique
// across the sinks and route targets of an outbox, the same on every
// copy), outbox-dedup-key ([DedupKeyHeader]) with the dedup key alone
// (unique per sink only), the row's own headers (what the producer attached), and the W3C traceparent
// and tracestate of the relay's delivery span, so a consumer that extracts
// them continues the producer's trace.
//
// # At least once, one delivery id
//
// The producer is idempotent and waits for all in-sync replicas, so the
// client's own retries never duplicate or reorder a record. A relay that
// dies after a record was acknowledged but before the row was marked sent
// leaves the row to a new producer, which Kafka cannot recognise as the
// same: the topic then holds two copies, both with the same delivery id
// header and record key, so a consumer that remembers the delivery ids it
// processed drops the second.
//
// # Outcomes
//
// The acknowledgement of all in-sync replicas is the success. Failures map
// like this:
//
//	unknown topic, invalid topic name, record too large or
//	invalid, authorisation refused                       permanent (dead-lettered)
//	throttling quota exceeded                            paused for DefaultThrottlePause, no attempt spent
//	timeouts, unreachable brokers, anything else         retried
//
// # Connection
//
// A sink instance holds one franz-go client, shared by its deliveries. It
// dials the brokers at the first delivery, keeps its connections, and
// reconnects with its own backoff when a broker goes away, so brokers that
// are down at start-up or mid-run only delay delivery: deliveries fail
// after timeout and wait in the outbox for their retry. At most
// max_in_flight records are buffered or unacknowledged at once.
// [Sink.Close] closes the client.
//
// SASL passwords never appear in errors or logs.
//
// This sink was tested against franz-go's in-process fake cluster (kfake),
// not a real Kafka; see docs/brokers.md.
package kafka
