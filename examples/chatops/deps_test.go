package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestChatOpsBuildLeavesOutTheBrokerClients: registering only the chat
// sinks links no broker client. (Mutation: main calling
// builtin.Register() fails this test, on every client.)
func TestChatOpsBuildLeavesOutTheBrokerClients(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	clients := []string{"github.com/nats-io/", "github.com/rabbitmq/amqp091-go", "github.com/twmb/franz-go", "github.com/redis/go-redis", "github.com/eclipse/paho.mqtt.golang"}
	for _, client := range clients {
		for _, dep := range deps {
			if strings.HasPrefix(dep, client) {
				t.Errorf("the chatops build links %s", dep)
			}
		}
	}
}
