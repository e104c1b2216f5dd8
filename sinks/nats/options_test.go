package nats_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/registry"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

func itoa(n int) string { return strconv.Itoa(n) }

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-pw"
	tests := []struct {
		name    string
		options map[string]any
		want    string // the error must contain it
	}{
		{"typo", map[string]any{"url": "nats://h:4222", "subject": "a", "subjct": "b"}, "subjct"},
		{"no url", map[string]any{"subject": "a"}, "option url: is required"},
		{"bad scheme", map[string]any{"url": "http://u:" + secret + "@h:4222", "subject": "a"}, "option url: server 1: scheme"},
		{"no host", map[string]any{"url": "nats://u:" + secret + "@:4222", "subject": "a"}, "option url: server 1 has no host"},
		{"second server bad", map[string]any{"url": "nats://h:4222, ftp://h", "subject": "a"}, "option url: server 2"},
		{"no subject", map[string]any{"url": "nats://h:4222"}, "option subject: is required"},
		{"bad template", map[string]any{"url": "nats://h:4222", "subject": "a.{{.Sink"}, "option subject: not a valid template"},
		{"unknown field", map[string]any{"url": "nats://h:4222", "subject": "a.{{.Ordering}}"}, "option subject: not a valid template"},
		{"bad stream", map[string]any{"url": "nats://h:4222", "subject": "a", "stream": "a.b"}, "option stream"},
		{"negative timeout", map[string]any{"url": "nats://h:4222", "subject": "a", "timeout": "-1s"}, "option timeout"},
		{"negative in-flight", map[string]any{"url": "nats://h:4222", "subject": "a", "max_in_flight": -1}, "option max_in_flight"},
		{"password alone", map[string]any{"url": "nats://h:4222", "subject": "a", "password": secret}, "option password is set but username is empty"},
		{"two methods", map[string]any{"url": "nats://h:4222", "subject": "a", "username": "u", "token": secret}, "set at most one"},
	}
	for _, tt := range tests {
		_, err := registry.Build(natssink.Type, "events", tt.options)
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
