package kafka_test

import (
	"strconv"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/sinks/kafka"
)

func strconvItoa(n int) string { return strconv.Itoa(n) }

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-pw"
	brokers := []any{"127.0.0.1:9092"}
	brokertest.CheckBadOptions(t, kafka.Type.Name, secret, []brokertest.BadOptions{
		{Name: "typo", Options: map[string]any{"brokers": brokers, "topic": "t", "topik": "t"}, Want: "topik"},
		{Name: "no brokers", Options: map[string]any{"topic": "t"}, Want: "option brokers: is required"},
		{Name: "broker without port", Options: map[string]any{"brokers": []any{"kafka"}, "topic": "t"}, Want: "option brokers[0]"},
		{Name: "no topic", Options: map[string]any{"brokers": brokers}, Want: "option topic: is required"},
		{Name: "bad template", Options: map[string]any{"brokers": brokers, "topic": "{{.Sink"}, Want: "option topic: not a valid template"},
		{Name: "negative timeout", Options: map[string]any{"brokers": brokers, "topic": "t", "timeout": "-1s"}, Want: "option timeout"},
		{Name: "unknown mechanism", Options: map[string]any{"brokers": brokers, "topic": "t", "sasl_mechanism": "gssapi", "username": "u", "password": secret}, Want: "option sasl_mechanism"},
		{Name: "mechanism without password", Options: map[string]any{"brokers": brokers, "topic": "t", "sasl_mechanism": "plain", "username": "u"}, Want: "needs username and password"},
		{Name: "password without mechanism", Options: map[string]any{"brokers": brokers, "topic": "t", "username": "u", "password": secret}, Want: "need sasl_mechanism"},
	})
}
