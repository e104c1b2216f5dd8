// Package webhook is the outboxd sink that POSTs each message to an HTTP
// endpoint, signed the Standard Webhooks way (https://www.standardwebhooks.com).
// [Type] defines it as the sink type "webhook", which the outboxd binary registers.
//
// # Configuration
//
//	sinks:
//	  orders-hook:
//	    type: webhook
//	    options:
//	      url: https://example.com/hooks/orders   # required, http or https
//	      secrets: [whsec_...new, whsec_...old]   # or secret: whsec_...
//	      timeout: 10s                            # per request, default DefaultTimeout
//	      headers: {Authorization: Bearer ...}    # extra static headers
//	      allow_private: false                    # see below
//
// # The request
//
// The body is exactly the JSON that was enqueued, with no envelope, sent as
// Content-Type: application/json. Three headers identify and sign it:
//
//	webhook-id:        the message's delivery id, "<sink>/<dedup key>"
//	                   (sink.Delivery.DeliveryID), the same on every retry
//	                   and unique across the sinks and route targets of an
//	                   outbox, so the receiver can de-duplicate on it
//	webhook-timestamp: the attempt's time in Unix seconds
//	webhook-signature: "v1,<base64 HMAC-SHA256>" of id + "." + timestamp + "."
//	                   + body, one per configured secret, space-separated
//
// Each secret is "whsec_" followed by the base64 of the key; during a
// rotation configure both the new and the old one, so receivers holding
// either can verify. With no secret configured no webhook-signature header
// is sent at all: do that only when the receiver authenticates requests some
// other way (a token in headers, mutual TLS on a proxy). Package
// standardwebhooks signs the requests (the destinations sink's too); a
// receiver written in Go can verify with it.
//
// A delivery id that cannot travel in an HTTP header unchanged (control
// characters, leading or trailing spaces) cannot be signed verifiably; such
// a row fails permanently rather than being sent under a different id.
//
// # Outcomes
//
// Responses are classified by [sinks.ClassifyResponse]: 2xx is delivered;
// 429 and 503 with Retry-After pause the sink until then; 410 and other 4xx,
// and 3xx (redirects are never followed), are permanent; 5xx, timeouts and
// connection errors are retried.
//
// # Private addresses
//
// Unless allow_private is true the sink refuses, at connect time and after
// DNS resolution, to reach loopback, private, link-local and other
// non-public addresses (see [netguard.CheckPublicAddr]): a webhook URL is often
// supplied by a customer, and must not become a way into the internal
// network or the cloud metadata service. Requests are traced with
// OpenTelemetry, which records the URL without user info; keep credentials
// in headers or secrets, not in the URL's path or query.
package webhook
