package main

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/linkcheck"
)

// TestCustomBuildLeavesOutTheBrokerClients: a custom build that registers
// package nobrokers' sink types does not link a broker client. (Mutation:
// main registering package builtin instead fails this test.)
func TestCustomBuildLeavesOutTheBrokerClients(t *testing.T) {
	t.Parallel()
	linkcheck.NoBrokerClients(t, ".")
}
