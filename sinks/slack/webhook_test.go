package slack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

func TestWebhookMode(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, map[string]any{"webhook_url": fake.WebhookURL(), "username": "outboxd"})
	d := retry(delivery(1, "k1", `{"text":"via webhook","blocks":[{"type":"divider"}],"unfurl_links":false}`))
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	posts := fake.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts = %d, want 1", len(posts))
	}
	p := posts[0]
	if !p.Webhook || p.Text != "via webhook" || !strings.Contains(string(p.Blocks), "divider") ||
		p.Username != "outboxd" || p.UnfurlLinks != "false" {
		t.Errorf("post = %+v", p)
	}
	if p.Metadata.EventType != "" {
		t.Errorf("webhook post carries metadata %+v; incoming webhooks take none", p.Metadata)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n != 0 {
		t.Errorf("webhook mode read history %d times", n)
	}
}

func TestWebhookErrorClasses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fault fakeslack.Fault
		want  string
	}{
		{"404 channel_not_found", fakeslack.Fault{Status: 404, Error: "channel_not_found"}, "permanent"},
		{"403 action_prohibited", fakeslack.Fault{Status: 403, Error: "action_prohibited"}, "permanent"},
		{"410 channel_is_archived", fakeslack.Fault{Status: 410, Error: "channel_is_archived"}, "permanent"},
		{"400 invalid_payload", fakeslack.Fault{Status: 400, Error: "invalid_payload"}, "permanent"},
		{"429", fakeslack.Fault{Status: 429, RetryAfter: 2 * time.Second}, "retry_after"},
		{"500", fakeslack.Fault{Status: 500, Error: "rollup_error"}, "retry"},
	}
	fake := newFake(t)
	s := newSink(t, map[string]any{"webhook_url": fake.WebhookURL()})
	for _, c := range cases {
		fake.Inject(fakeslack.MethodWebhook, c.fault)
		if err := deliver(t, s, delivery(1, "k", `{"text":"x"}`)); outcome(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}

	s = newSink(t, map[string]any{"webhook_url": stoppedFake().WebhookURL()})
	err := deliver(t, s, delivery(1, "k", `{"text":"x"}`))
	if outcome(err) != "retry" {
		t.Errorf("connection refused: %v, want retryable", err)
	}
	if err != nil && strings.Contains(err.Error(), "fakesecret") {
		t.Errorf("error echoes the webhook URL: %v", err)
	}
}
