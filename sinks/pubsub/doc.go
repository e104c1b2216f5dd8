// Package pubsub is the outboxd sink that publishes each message to a
// Google Cloud Pub/Sub topic (cloud.google.com/go/pubsub/v2), in order per
// ordering key and at least once, with the delivery id in an attribute for
// receivers to de-duplicate on. [Type] defines it as the sink type
// "pubsub", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  order-events:
//	    type: pubsub
//	    options:
//	      project: my-project                 # required
//	      topic: orders                       # required; the topic's id, not its full name
//	      credentials_file: /secrets/key.json # or credentials_json: ${PUBSUB_KEY}; default ADC
//	      endpoint: 127.0.0.1:8085            # an emulator (plaintext, no credentials); default Google's
//	      timeout: 10s                        # one publish's wait, default sinks.DefaultPublishTimeout
//	      connect_timeout: 5s                 # making the client, default sinks.DefaultConnectTimeout
//	      max_in_flight: 256                  # default sinks.DefaultMaxInFlight
//
// Without credentials_file or credentials_json the client finds
// Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the
// metadata server of GKE or Compute Engine, gcloud's). credentials_json is a
// secret: never shown nor logged. The client needs only the
// pubsub.topics.publish permission (roles/pubsub.publisher on the topic).
//
// # The message
//
// The message's data is exactly the JSON that was enqueued (or what the
// route's body template rendered). Its attributes are the row's own headers,
// the W3C traceparent and tracestate of the relay's delivery span, and
// outbox-delivery-id ([DeliveryIDAttribute]), the delivery id
// "<sink>/<dedup key>" ([sink.Delivery.DeliveryID]). Its ordering key is
// the row's ordering key. A sent row's receipt records the topic and the
// message id Pub/Sub assigned.
//
// # Order
//
// The publisher has message ordering enabled, and the relay delivers one
// ordering key's rows one at a time, so a subscription with message
// ordering enabled receives each key's messages in the order they were
// enqueued. When a publish fails, the client pauses its ordering key and
// refuses the key's later messages; the sink resumes the key
// (ResumePublish) before returning the failure, so the relay's retry of the
// same row is published. Rows without an ordering key are published
// without one, in no particular order.
//
// # At least once
//
// Pub/Sub keeps no publisher-side de-duplication: a relay that died after
// the publish but before marking the row sent publishes the row again, and
// a publish whose answer was lost (a timeout) may have been stored. Each
// copy carries the same outbox-delivery-id attribute: a receiver that
// must act once de-duplicates on it (Pub/Sub's exactly-once delivery, a
// subscription setting, covers redeliveries to the subscriber, not
// repeated publishes). The client's own retries are off, so every retry
// is the relay's, with its backoff and attempt budget.
//
// # Limits
//
// The sink refuses, permanently and before publishing, what Pub/Sub would
// refuse: more than 100 attributes, an attribute name over 256 bytes or
// starting with "goog", a value over 1024 bytes, an ordering key over 1024
// bytes; the client refuses a message over 10 MB. Pub/Sub's publish
// quotas are per project and region and large, so the sink declares no
// default rate_limit; a RESOURCE_EXHAUSTED answer pauses the sink for
// DefaultQuotaPause without spending an attempt (Pub/Sub sends no
// Retry-After).
//
// # Outcomes
//
//	the topic does not exist (NOT_FOUND), INVALID_ARGUMENT,
//	PERMISSION_DENIED, UNAUTHENTICATED, a refused message    permanent (dead-lettered)
//	RESOURCE_EXHAUSTED                                        paused for DefaultQuotaPause, no attempt spent
//	UNAVAILABLE, timeouts, anything else                      retried
//
// # Connection
//
// A sink instance holds one client and one publisher, made at the first
// delivery (reading credentials_file then), so a missing service only
// delays delivery; gRPC reconnects by itself afterwards. The delivery's
// deadline and timeout bound every publish. [Sink.Close] publishes what is
// in flight, waiting at most timeout, and closes the client.
package pubsub
