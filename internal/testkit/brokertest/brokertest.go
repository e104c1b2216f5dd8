// Package brokertest holds what the broker sinks' tests share: checking
// that a broker runs, producing traced messages, running relays (in a
// child process that SIGKILLs itself mid-publish, too), checking what a
// consumer read, and the means to take a broker away (a private
// nats-server, a TCP proxy that can be cut or stalled). The sink
// contract's own checks are package sinktest's, public.
package brokertest

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

// Addresses of the brokers the machine runs, overridable for other setups.
const (
	// NATSAddrEnv overrides DefaultNATSAddr.
	NATSAddrEnv = "TEST_NATS_ADDR"
	// DefaultNATSAddr is the NATS server (with JetStream) of the machine.
	DefaultNATSAddr = "127.0.0.1:4222"
	// RabbitMQAddrEnv overrides DefaultRabbitMQAddr.
	RabbitMQAddrEnv = "TEST_RABBITMQ_ADDR"
	// DefaultRabbitMQAddr is the RabbitMQ of the machine (guest/guest).
	DefaultRabbitMQAddr = "127.0.0.1:5672"
)

// dialTimeout bounds the check that a broker listens.
const dialTimeout = 2 * time.Second

// NATSAddr returns the address of the NATS server tests use.
func NATSAddr() string { return envOr(NATSAddrEnv, DefaultNATSAddr) }

// RabbitMQAddr returns the address of the RabbitMQ tests use.
func RabbitMQAddr() string { return envOr(RabbitMQAddrEnv, DefaultRabbitMQAddr) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Require checks that the broker called name listens at addr. When it does
// not, the test fails in CI (CI set: .ci/run starts the brokers, so a
// missing one is a fault) and is skipped elsewhere; both say how to start
// it.
func Require(t testing.TB, name, addr, start string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err == nil {
		_ = c.Close()
		return
	}
	testenv.SkipOrFail(t, name+" is not reachable at "+addr+" ("+err.Error()+"); start it with: "+start+" (.ci/run starts it)")
}
