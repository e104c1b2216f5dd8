// Package netguard is the outbound HTTP client every integration that posts
// to an address someone else chose uses: the webhook, chat and incident
// sinks, and tenants' destinations. It checks each address when it is
// dialled, not when its name is parsed (so a name that resolves to a
// private address, or is re-pointed after a check, is still refused),
// speaks to an outbound proxy with CONNECT to the address it checked, keeps
// request URLs (which often carry tokens) out of spans and errors, and bounds
// what a receiver can make it read.
//
// It imports nothing of outboxd's, so destinations (below the sinks) and the
// sinks share one network policy.
package netguard
