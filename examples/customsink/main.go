// Command customsink is a user's own build of outboxd: the built-in sink
// types that need no broker client (package nobrokers: the NATS, RabbitMQ
// and Kafka clients stay out of the binary) plus a "file" sink type that
// appends each message to a JSON lines file. It gets the same CLI,
// plugins.yaml, retries, rate limits, dead letters and tracing as outboxd,
// because it calls the same entry point.
//
//	sinks:
//	  archive:
//	    type: file
//	    options: {path: /var/lib/outbox/archive.jsonl}
package main

import (
	"github.com/outboxd/outboxd/cmd"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/builtin/nobrokers"
)

func main() {
	nobrokers.Register()
	registry.Register(FileSinkType)
	cmd.Main()
}
