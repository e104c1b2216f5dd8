// Package standardwebhooks signs and verifies webhooks the Standard Webhooks
// way (https://www.standardwebhooks.com): a secret is "whsec_" and the base64
// of its key, and a request carries three headers, webhook-id,
// webhook-timestamp (Unix seconds) and webhook-signature, "v1," and the
// base64 HMAC-SHA256 of id, timestamp and body joined by dots, one per
// signing secret, space-separated.
//
// It holds what every sender and receiver of outboxd's webhooks shares, and
// imports only the standard library: the webhook sink (package
// sinks/webhook) and the destinations of tenants (package destinations)
// sign with it, and a receiver written in Go can verify with it. It sends
// nothing itself.
package standardwebhooks
