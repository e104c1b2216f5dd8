package main

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/linkcheck"
)

// TestChatOpsBuildLeavesOutTheBrokerClients: registering only the chat
// sinks links no broker client. (Mutation: main calling
// builtin.Register() fails this test, on every client; so does a blank
// import of sinks/mqtt or sinks/pubsub alone.)
func TestChatOpsBuildLeavesOutTheBrokerClients(t *testing.T) {
	t.Parallel()
	linkcheck.NoBrokerClients(t, ".")
}
