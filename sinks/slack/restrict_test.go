package slack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// TestAllowedChannels: a payload's channel redirects a post anywhere the
// token reaches unless allowed_channels is set; then only the channel
// option and the listed channels (IDs, or names in any case, with or
// without '#') are accepted, anything else fails permanently without a
// post, in token and in webhook mode.
// (Mutation: allowed_channels never checked fails this test.)
func TestAllowedChannels(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.AddChannel(fakeslack.Channel{ID: "C0DEPLOYS", Name: "deploys"})
	open := newSink(t, tokenOptions(fake, nil))
	if err := deliver(t, open, delivery(1, "open", `{"text":"x","channel":"C0ELSEWHERE"}`)); err != nil {
		t.Fatalf("without allowed_channels a payload may choose its channel: %v", err)
	}

	restricted := newSink(t, tokenOptions(fake, map[string]any{"allowed_channels": []any{"#Deploys", "C0OPS"}}))
	hook := newSink(t, map[string]any{"webhook_url": fake.WebhookURL(), "channel": "#alerts", "allowed_channels": "C0OPS"})
	for i, refused := range []string{"C0ELSEWHERE", "#random", "c0ops", "deploys-old"} {
		payload := fmt.Sprintf(`{"text":"x","channel":%q}`, refused)
		for mode, s := range map[string]*slack.Sink{"token": restricted, "webhook": hook} {
			err := deliver(t, s, delivery(int64(10+i), "refused", payload))
			if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "allowed_channels") {
				t.Errorf("%s mode, channel %s: %v, want a permanent error naming allowed_channels", mode, refused, err)
			}
		}
	}
	if n := len(fake.Posts()); n != 1 {
		t.Fatalf("%d posts, want only the unrestricted sink's", n)
	}

	for i, allowed := range []string{"", testChannel, "C0OPS", "#deploys", "deploys"} {
		payload := fmt.Sprintf(`{"text":"x","channel":%q}`, allowed)
		if err := deliver(t, restricted, delivery(int64(20+i), "allowed", payload)); err != nil {
			t.Errorf("channel %q: %v", allowed, err)
		}
	}
	if err := deliver(t, hook, delivery(30, "allowed", `{"text":"x","channel":"C0OPS"}`)); err != nil {
		t.Errorf("webhook mode, an allowed channel: %v", err)
	}
	var got []string
	for _, p := range fake.Posts()[1:] {
		got = append(got, p.Channel)
	}
	if want := []string{testChannel, testChannel, "C0OPS", "C0DEPLOYS", "C0DEPLOYS", "C0OPS"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("posted to %v, want %v", got, want)
	}
}

// TestEscapeMentions: a payload mentions whom it likes (@channel, @here,
// users, user groups) unless escape_mentions is set; then Slack receives
// them as text, in the text, in mrkdwn blocks and as rich_text elements,
// through the API and the incoming webhook.
// (Mutation: escapeMentions without specialEscaper fails this test.)
func TestEscapeMentions(t *testing.T) {
	t.Parallel()
	const payload = `{"text":"<!channel> deploy done, @here <@U0123> <!subteam^S01|ops>",` +
		`"blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*<!everyone>*"}},` +
		`{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"broadcast","range":"channel"},{"type":"user","user_id":"U0123"}]}]}]}`
	fake := newFake(t)
	plain := newSink(t, tokenOptions(fake, nil))
	escaped := newSink(t, tokenOptions(fake, map[string]any{"escape_mentions": true}))
	hook := newSink(t, map[string]any{"webhook_url": fake.WebhookURL(), "escape_mentions": "true"})
	for i, s := range []*slack.Sink{plain, escaped, hook} {
		if err := deliver(t, s, delivery(int64(i+1), fmt.Sprint("m-", i), payload)); err != nil {
			t.Fatal(err)
		}
	}
	posts := fake.Posts()
	if len(posts) != 3 {
		t.Fatalf("%d posts, want 3", len(posts))
	}
	if p := posts[0]; !strings.HasPrefix(p.Text, "<!channel>") || !strings.Contains(string(p.Blocks), "broadcast") {
		t.Errorf("without escape_mentions the mentions must reach Slack as sent: %+v", p)
	}
	for _, p := range posts[1:] {
		var blocks any
		if err := json.Unmarshal(p.Blocks, &blocks); err != nil {
			t.Fatalf("blocks %s: %v", p.Blocks, err)
		}
		var flat strings.Builder // the blocks without JSON's escapes of <, > and &
		enc := json.NewEncoder(&flat)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(blocks)
		decoded := flat.String()
		if strings.Contains(p.Text, "<!") || strings.Contains(p.Text, "<@") || strings.Contains(p.Text, "@here") ||
			strings.Contains(decoded, "<!") || strings.Contains(decoded, `"broadcast"`) || strings.Contains(decoded, `"user"`) {
			t.Errorf("webhook %v: a mention reached Slack:\ntext %q\nblocks %s", p.Webhook, p.Text, decoded)
		}
		if !strings.Contains(p.Text, "&lt;!channel>") || !strings.Contains(decoded, "*&lt;!everyone>*") || !strings.Contains(decoded, "U0123") {
			t.Errorf("webhook %v: the mentions are not shown as text:\ntext %q\nblocks %s", p.Webhook, p.Text, decoded)
		}
	}
}
