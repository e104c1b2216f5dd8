// Package sinks holds what the concrete sinks share: an HTTP client, the
// mapping of HTTP responses to delivery outcomes, and for the broker sinks
// a redialing connection, address templates, trace headers and secret
// redaction. Each integration lives in its own sub-package (sinks/slack,
// sinks/webhook, sinks/email, sinks/destinations, sinks/nats,
// sinks/rabbitmq, sinks/kafka); package sinks/builtin lists the built-in
// ones, in one place.
//
// # The shape of a sink package
//
// Every built-in sink package exports the same things, and a new one (a
// broker sink, say) follows them:
//
//	type Options struct{ ... }    // its options, declared as confschema describes
//	func DefaultOptions() Options // the options before its options block applies
//	const Description = "..."     // what it delivers to, in one line
//	var Type = registry.Define("webhook", Description, DefaultOptions(), newSink)
//
// The registry decodes the options block into a copy of DefaultOptions and
// hands it to newSink with the sink's environment (sink.Env: its logger,
// tracer and meter providers, the resources its host shares); newSink
// checks what decoding cannot and builds the sink without any I/O
// (configuration checks build every sink). A type whose sinks declare a
// payload shape says so with WithShape, one that looks up a shared
// resource with WithResources. From Type, `outboxd config show` prints
// the effective options and docs/configuration.md documents them.
package sinks
