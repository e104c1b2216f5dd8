package slack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/slack"
)

func TestOptionValidation(t *testing.T) {
	t.Parallel()
	const token = "xoxb-999-top-secret"
	const hook = "https://hooks.slack.com/services/T1/B1/hooksecret"
	cases := []struct {
		name    string
		options map[string]any
		wantErr string
	}{
		{"neither token nor webhook", map[string]any{"channel": "C1"}, "token"},
		{"both token and webhook", map[string]any{"token": token, "webhook_url": hook}, "exclude each other"},
		{"token not a string", map[string]any{"token": 12345}, "option token: want a string"},
		{"unknown option", map[string]any{"token": token, "chanel": "C1"}, "chanel"},
		{"bad api_url", map[string]any{"token": token, "api_url": "slack.local"}, "api_url"},
		{"webhook not a URL", map[string]any{"webhook_url": "hooks.slack.com/x"}, "webhook_url"},
		{"dedupe with webhook", map[string]any{"webhook_url": hook, "dedupe": true}, "dedupe"},
		{"user with dedupe", map[string]any{"token": token, "channel": "@alice"}, "DM's channel ID"},
		{"dedupe not a bool", map[string]any{"token": token, "dedupe": "maybe"}, "dedupe"},
	}
	for _, c := range cases {
		_, err := slack.Type.New("n", c.options, sink.Env{})
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.wantErr)
			continue
		}
		if strings.Contains(err.Error(), "top-secret") || strings.Contains(err.Error(), "hooksecret") {
			t.Errorf("%s: error echoes a secret: %v", c.name, err)
		}
	}

	valid := []map[string]any{
		{"token": token, "channel": "C0123ABCD"},
		{"token": token, "channel": "#alerts"},                        // resolved to its ID when a retry needs it
		{"token": token},                                              // channel per payload
		{"token": token, "channel": "#alerts", "dedupe": false},       // names are fine without dedupe
		{"token": token, "dedupe": "true", "api_url": "http://proxy"}, // env-expanded bool
		{"webhook_url": hook, "username": "bot", "icon_emoji": ":x:"},
		{"webhook_url": hook, "dedupe": false},
	}
	for _, o := range valid {
		if _, err := slack.Type.New("n", o, sink.Env{}); err != nil {
			t.Errorf("New(%v): %v", o, err)
		}
	}
}

func TestNewHasDefaultRateLimit(t *testing.T) {
	t.Parallel()
	snk, err := slack.Type.New("alerts", map[string]any{"token": "xoxb-1", "channel": "C1"}, sink.Env{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	d, ok := snk.(sink.RateLimitDefaulter)
	if !ok {
		t.Fatalf("%T does not implement sink.RateLimitDefaulter", snk)
	}
	want := sink.RateLimit{Rate: 1, Per: time.Second, Burst: 1}
	if got := d.DefaultRateLimit(); got != want {
		t.Errorf("DefaultRateLimit = %+v, want %+v", got, want)
	}
}
