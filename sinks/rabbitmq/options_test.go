package rabbitmq_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

func strconvItoa(n int) string { return strconv.Itoa(n) }

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-pw"
	tests := []struct {
		name    string
		options map[string]any
		want    string // the error must contain it
	}{
		{"typo", map[string]any{"url": "amqp://h", "exchnage": "x"}, "exchnage"},
		{"no url", map[string]any{"exchange": "x"}, "option url: is required"},
		{"bad scheme", map[string]any{"url": "http://u:" + secret + "@h/"}, "option url: not an amqp://"},
		{"bad port", map[string]any{"url": "amqp://u:" + secret + "@h:port/"}, "option url: not an amqp://"},
		{"bad template", map[string]any{"url": "amqp://h", "routing_key": "a.{{.Sink"}, "option routing_key: not a valid template"},
		{"negative timeout", map[string]any{"url": "amqp://h", "timeout": "-1s"}, "option timeout"},
		{"negative in-flight", map[string]any{"url": "amqp://h", "max_in_flight": -2}, "option max_in_flight"},
		{"password alone", map[string]any{"url": "amqp://h", "password": secret}, "option password is set but username is empty"},
	}
	for _, tt := range tests {
		_, err := registry.Build(rabbitmq.Type, "orders", tt.options)
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
