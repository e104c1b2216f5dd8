package slack

import (
	"encoding/json"
	"testing"

	"github.com/outboxd/outboxd/core"
)

// FuzzParsePayload: any bytes either parse into a message with text or
// blocks, or fail with a permanent error (retrying the same bytes cannot
// help); nothing panics, and a parsed message renders in both modes.
func FuzzParsePayload(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hi"}`, `{"blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*b*"}}]}`,
		`{"text":"t","channel":"C1","thread_ts":"1.2","unfurl_links":false}`, `{"blocks":null}`,
		`{"blocks":[{"type":"nope"}],"text":"x"}`, `{"text":""}`, `{"x":1}`, `[]`, `"s"`, `null`, ``, `{"text":"a"} trailing`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := parsePayload(json.RawMessage(raw))
		if err != nil {
			if !core.IsPermanent(err) {
				t.Fatalf("payload error is not permanent: %v", err)
			}
			return
		}
		if m.Text == "" && len(m.blocks.BlockSet) == 0 {
			t.Fatalf("accepted a payload without text or blocks: %q", raw)
		}
		_ = m.msgOptions(Options{Username: "u"})
		_ = m.webhookMessage(Options{})
	})
}
