package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
)

// Payload is the JSON a slack sink delivers; see the package documentation
// for examples. Text or Blocks (or both) must be set.
type Payload struct {
	// Text is the message, or the notification fallback when Blocks is set.
	Text string `json:"text,omitempty"`
	// Blocks is a Block Kit array, passed to Slack as is.
	Blocks json.RawMessage `json:"blocks,omitempty"`
	// Channel overrides the sink's channel option.
	Channel string `json:"channel,omitempty"`
	// ThreadTS posts the message as a reply in that thread.
	ThreadTS string `json:"thread_ts,omitempty"`
	// UnfurlLinks turns link previews on or off; unset leaves Slack's default.
	UnfurlLinks *bool `json:"unfurl_links,omitempty"`
	// UpdateRoot, on a row of a thread that is not its first, also edits
	// the thread's first message to this message's text and blocks
	// (chat.update). Routes set it with update_root: true.
	UpdateRoot bool `json:"update_root,omitempty"`
}

// message is a payload checked and ready to send.
type message struct {
	Payload
	blocks slackapi.Blocks
}

// parsePayload decodes and checks a delivery's payload, showing its
// mentions as text when escape is set (see escapeMentions). Its errors are
// permanent: retrying the same bytes cannot help.
func parsePayload(raw json.RawMessage, escape bool) (message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m.Payload); err != nil {
		return m, sink.Permanent(fmt.Errorf("payload: want {\"text\", \"blocks\", \"channel\", \"thread_ts\", \"unfurl_links\", \"update_root\"}: %w", err))
	}
	if len(m.Blocks) > 0 && !bytes.Equal(bytes.TrimSpace(m.Blocks), []byte("null")) {
		blocks := m.Blocks
		var err error
		if escape {
			blocks, err = escapeBlockMentions(blocks)
		}
		if err == nil {
			err = json.Unmarshal(blocks, &m.blocks)
		}
		if err != nil {
			return m, sink.Permanent(fmt.Errorf("payload: blocks: %w", err))
		}
	}
	if escape {
		m.Text = escapeMentions(m.Text)
	}
	if m.Text == "" && len(m.blocks.BlockSet) == 0 {
		return m, sink.Permanent(errors.New("payload: has neither text nor blocks"))
	}
	return m, nil
}

// msgOptions renders the message (with the sink's username and icon) as
// chat.postMessage options.
func (m message) msgOptions(o Options) []slackapi.MsgOption {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(m.Text, false)}
	if len(m.blocks.BlockSet) > 0 {
		opts = append(opts, slackapi.MsgOptionBlocks(m.blocks.BlockSet...))
	}
	if m.ThreadTS != "" {
		opts = append(opts, slackapi.MsgOptionTS(m.ThreadTS))
	}
	if m.UnfurlLinks != nil {
		if *m.UnfurlLinks {
			opts = append(opts, slackapi.MsgOptionEnableLinkUnfurl())
		} else {
			opts = append(opts, slackapi.MsgOptionDisableLinkUnfurl())
		}
	}
	if o.Username != "" {
		opts = append(opts, slackapi.MsgOptionUsername(o.Username))
	}
	if o.IconEmoji != "" {
		opts = append(opts, slackapi.MsgOptionIconEmoji(o.IconEmoji))
	}
	return opts
}

// webhookMessage renders the message for an incoming webhook.
func (m message) webhookMessage(o Options) *slackapi.WebhookMessage {
	w := &slackapi.WebhookMessage{
		Text:            m.Text,
		Channel:         m.Channel,
		ThreadTimestamp: m.ThreadTS,
		UnfurlLinks:     m.UnfurlLinks,
		Username:        o.Username,
		IconEmoji:       o.IconEmoji,
	}
	if len(m.blocks.BlockSet) > 0 {
		w.Blocks = &m.blocks
	}
	return w
}
