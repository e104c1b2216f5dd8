package webhook_test

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/webhook"
)

func TestBadOptions(t *testing.T) {
	t.Parallel()
	const token = "tok3n-in-url"
	tests := []struct {
		name    string
		options map[string]any
		want    string // the error must contain it
	}{
		{"typo", map[string]any{"url": "https://example.com", "alow_private": true}, "alow_private"},
		{"no url", map[string]any{"secret": secretA}, "option url: is required"},
		{"bad scheme", map[string]any{"url": "ftp://example.com/" + token}, "option url: scheme"},
		{"unparsable url", map[string]any{"url": "https://exa mple.com/" + token}, "option url: not a valid URL"},
		{"no host", map[string]any{"url": "https:///" + token}, "option url: has no host"},
		{"secret without prefix", map[string]any{"url": "https://example.com", "secret": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "option secret: does not start with whsec_"},
		{"secret not base64", map[string]any{"url": "https://example.com", "secret": "whsec_not*base64*at*all"}, "option secret: the part after whsec_ is not standard base64"},
		{"secret too short", map[string]any{"url": "https://example.com", "secret": "whsec_c2hvcnQ="}, "option secret: the key is 5 bytes"},
		{"second secret bad", map[string]any{"url": "https://example.com", "secrets": []any{secretA, "whsec_bad!"}}, "option secrets[1]:"},
		{"both secret and secrets", map[string]any{"url": "https://example.com", "secret": secretA, "secrets": []any{secretB}}, "options secret and secrets"},
		{"negative timeout", map[string]any{"url": "https://example.com", "timeout": "-1s"}, "option timeout"},
		{"bad timeout", map[string]any{"url": "https://example.com", "timeout": "soon"}, "timeout"},
		{"reserved header", map[string]any{"url": "https://example.com", "headers": map[string]any{"Webhook-Signature": "x"}}, "option headers: webhook-signature"},
		{"bad header name", map[string]any{"url": "https://example.com", "headers": map[string]any{"Bad Name": "x"}}, "option headers:"},
		{"bad header value", map[string]any{"url": "https://example.com", "headers": map[string]any{"Authorization": "Bearer " + token + "\n"}}, "option headers: the value of Authorization"},
	}
	for _, tt := range tests {
		_, err := webhook.Type.New("hook", tt.options, sink.Env{})
		if err == nil {
			t.Errorf("%s: built, want an error", tt.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) {
			t.Errorf("%s: error %q, want it to contain %q", tt.name, msg, tt.want)
		}
		for _, secret := range []string{token, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "c2hvcnQ=", "not*base64", "bad!"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: error %q repeats a secret", tt.name, msg)
			}
		}
	}
}
