package nats_test

import (
	"strconv"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

func itoa(n int) string { return strconv.Itoa(n) }

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-pw"
	brokertest.CheckBadOptions(t, natssink.Type.Name, secret, []brokertest.BadOptions{
		{Name: "typo", Options: map[string]any{"url": "nats://h:4222", "subject": "a", "subjct": "b"}, Want: "subjct"},
		{Name: "no url", Options: map[string]any{"subject": "a"}, Want: "option url: is required"},
		{Name: "bad scheme", Options: map[string]any{"url": "http://u:" + secret + "@h:4222", "subject": "a"}, Want: "option url: server 1: scheme"},
		{Name: "no host", Options: map[string]any{"url": "nats://u:" + secret + "@:4222", "subject": "a"}, Want: "option url: server 1 has no host"},
		{Name: "second server bad", Options: map[string]any{"url": "nats://h:4222, ftp://h", "subject": "a"}, Want: "option url: server 2"},
		{Name: "no subject", Options: map[string]any{"url": "nats://h:4222"}, Want: "option subject: is required"},
		{Name: "bad template", Options: map[string]any{"url": "nats://h:4222", "subject": "a.{{.Sink"}, Want: "option subject: not a valid template"},
		{Name: "unknown field", Options: map[string]any{"url": "nats://h:4222", "subject": "a.{{.Ordering}}"}, Want: "option subject: not a valid template"},
		{Name: "bad stream", Options: map[string]any{"url": "nats://h:4222", "subject": "a", "stream": "a.b"}, Want: "option stream"},
		{Name: "negative timeout", Options: map[string]any{"url": "nats://h:4222", "subject": "a", "timeout": "-1s"}, Want: "option timeout"},
		{Name: "negative in-flight", Options: map[string]any{"url": "nats://h:4222", "subject": "a", "max_in_flight": -1}, Want: "option max_in_flight"},
		{Name: "password alone", Options: map[string]any{"url": "nats://h:4222", "subject": "a", "password": secret}, Want: "option password is set but username is empty"},
		{Name: "two methods", Options: map[string]any{"url": "nats://h:4222", "subject": "a", "username": "u", "token": secret}, Want: "set at most one"},
	})
}
