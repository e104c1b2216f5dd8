package rabbitmq_test

import (
	"strconv"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

func strconvItoa(n int) string { return strconv.Itoa(n) }

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-pw"
	brokertest.CheckBadOptions(t, rabbitmq.Type.Name, secret, []brokertest.BadOptions{
		{Name: "typo", Options: map[string]any{"url": "amqp://h", "exchnage": "x"}, Want: "exchnage"},
		{Name: "no url", Options: map[string]any{"exchange": "x"}, Want: "option url: is required"},
		{Name: "bad scheme", Options: map[string]any{"url": "http://u:" + secret + "@h/"}, Want: "option url: not an amqp://"},
		{Name: "bad port", Options: map[string]any{"url": "amqp://u:" + secret + "@h:port/"}, Want: "option url: not an amqp://"},
		{Name: "bad template", Options: map[string]any{"url": "amqp://h", "routing_key": "a.{{.Sink"}, Want: "option routing_key: not a valid template"},
		{Name: "negative timeout", Options: map[string]any{"url": "amqp://h", "timeout": "-1s"}, Want: "option timeout"},
		{Name: "negative in-flight", Options: map[string]any{"url": "amqp://h", "max_in_flight": -2}, Want: "option max_in_flight"},
		{Name: "password alone", Options: map[string]any{"url": "amqp://h", "password": secret}, Want: "option password is set but username is empty"},
	})
}
