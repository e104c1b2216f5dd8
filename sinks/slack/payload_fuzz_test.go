package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
)

// FuzzParsePayload: any bytes either parse into a message with text or
// blocks, or fail with a permanent error (retrying the same bytes cannot
// help); nothing panics, and a parsed message renders in both modes. With
// mentions escaped, its text holds none.
// (Mutation: escapeMentions without specialEscaper fails this target on its
// seeds.)
func FuzzParsePayload(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hi"}`, `{"blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*b*"}}]}`,
		`{"text":"t","channel":"C1","thread_ts":"1.2","unfurl_links":false}`, `{"blocks":null}`,
		`{"blocks":[{"type":"nope"}],"text":"x"}`, `{"text":""}`, `{"x":1}`, `[]`, `"s"`, `null`, ``, `{"text":"a"} trailing`,
		`{"text":"<!here> @Channel <@U1> <!subteam^S1>","blocks":[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"broadcast","range":"everyone"}]}]}]}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, escape bool) {
		m, err := parsePayload(json.RawMessage(raw), escape)
		if err != nil {
			if !sink.IsPermanent(err) {
				t.Fatalf("payload error is not permanent: %v", err)
			}
			return
		}
		if m.Text == "" && len(m.blocks.BlockSet) == 0 {
			t.Fatalf("accepted a payload without text or blocks: %q", raw)
		}
		if escape && (strings.Contains(m.Text, "<!") || strings.Contains(m.Text, "<@") || plainMention.MatchString(m.Text)) {
			t.Fatalf("escaped text %q still mentions", m.Text)
		}
		_ = m.msgOptions(Options{Username: "u"})
		_ = m.webhookMessage(Options{})
	})
}
