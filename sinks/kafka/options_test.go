package kafka_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/kafka"
)

func strconvItoa(n int) string { return strconv.Itoa(n) }

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-pw"
	brokers := []any{"127.0.0.1:9092"}
	tests := []struct {
		name    string
		options map[string]any
		want    string // the error must contain it
	}{
		{"typo", map[string]any{"brokers": brokers, "topic": "t", "topik": "t"}, "topik"},
		{"no brokers", map[string]any{"topic": "t"}, "option brokers: is required"},
		{"broker without port", map[string]any{"brokers": []any{"kafka"}, "topic": "t"}, "option brokers[0]"},
		{"no topic", map[string]any{"brokers": brokers}, "option topic: is required"},
		{"bad template", map[string]any{"brokers": brokers, "topic": "{{.Sink"}, "option topic: not a valid template"},
		{"negative timeout", map[string]any{"brokers": brokers, "topic": "t", "timeout": "-1s"}, "option timeout"},
		{"unknown mechanism", map[string]any{"brokers": brokers, "topic": "t", "sasl_mechanism": "gssapi", "username": "u", "password": secret}, "option sasl_mechanism"},
		{"mechanism without password", map[string]any{"brokers": brokers, "topic": "t", "sasl_mechanism": "plain", "username": "u"}, "needs username and password"},
		{"password without mechanism", map[string]any{"brokers": brokers, "topic": "t", "username": "u", "password": secret}, "need sasl_mechanism"},
	}
	for _, tt := range tests {
		_, err := registry.Build(kafka.Type, "events", tt.options)
		if err == nil {
			t.Errorf("%s: built, want an error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %q, want it to contain %q", tt.name, err, tt.want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q repeats a secret", tt.name, err)
		}
	}
}
