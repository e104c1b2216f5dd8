package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCustomBuildLeavesOutTheBrokerClients: a custom build that registers
// package nobrokers' sink types does not link a broker client. (Mutation:
// main registering package builtin instead fails this test.)
func TestCustomBuildLeavesOutTheBrokerClients(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, client := range []string{"github.com/nats-io/", "github.com/rabbitmq/amqp091-go", "github.com/twmb/franz-go"} {
		for _, dep := range deps {
			if strings.HasPrefix(dep, client) {
				t.Errorf("the custom build links %s", dep)
			}
		}
	}
}
