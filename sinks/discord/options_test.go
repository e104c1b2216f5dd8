package discord_test

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/discord"
)

// Options Discord or the sink cannot use are refused when the sink is
// built (config check), each error naming its option and never quoting the
// webhook URL, whose path is its token. (Mutation: quoting the URL in the
// path error fails the secret check.)
func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	const token = "s3cr3t-t0ken"
	good := "https://discord.com/api/webhooks/123/" + token
	for name, c := range map[string]struct {
		opts map[string]any
		want string
	}{
		"missing":          {map[string]any{}, "option webhook_url: required"},
		"not http":         {map[string]any{"webhook_url": "ftp://discord.com/api/webhooks/1/" + token}, "option webhook_url"},
		"not a webhook":    {map[string]any{"webhook_url": "https://discord.com/channels/1/" + token}, "/webhooks/<id>/<token>"},
		"query":            {map[string]any{"webhook_url": good + "?thread_id=1"}, "thread_id option"},
		"timeout":          {map[string]any{"webhook_url": good, "timeout": "-1s"}, "option timeout"},
		"username":         {map[string]any{"webhook_url": good, "username": "clyde"}, "option username"},
		"avatar":           {map[string]any{"webhook_url": good, "avatar_url": "avatar.png"}, "option avatar_url"},
		"thread":           {map[string]any{"webhook_url": good, "thread_id": "general"}, "option thread_id"},
		"mention":          {map[string]any{"webhook_url": good, "allowed_mentions": []any{"here"}}, "option allowed_mentions[0]"},
		"unknown option":   {map[string]any{"webhook_url": good, "channel": "x"}, "channel"},
		"secret in scheme": {map[string]any{"webhook_url": "discord.com/api/webhooks/1/" + token}, "option webhook_url"},
	} {
		_, err := discord.Type.New("ops", c.opts, sink.Env{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the error quotes the token: %v", name, err)
		}
	}
	s, err := discord.Type.New("ops", map[string]any{"webhook_url": good + "/"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := s.(sink.RateKeyer).RateKey(nil); key != "123" {
		t.Errorf("rate key %q, want the webhook's id 123", key)
	}
	if rl := s.(sink.RateLimitDefaulter).DefaultRateLimit(); !rl.PerKey || rl.Rate+rl.Burst > 30 || rl.Burst > 5 {
		t.Errorf("default rate limit %+v: want per webhook, at most 30 a minute and 5 back to back", rl)
	}
}
