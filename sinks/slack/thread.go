package slack

import (
	"context"
	"encoding/json"
	"fmt"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
)

// threadRoot is where a thread's first message is: its receipt.
type threadRoot struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// parseThreadRoot reads the receipt of d's thread's first message; nil
// when d is not in a thread or is its first message.
func parseThreadRoot(d *sink.Delivery) (*threadRoot, error) {
	if len(d.ThreadRoot) == 0 {
		return nil, nil
	}
	var root threadRoot
	if err := json.Unmarshal(d.ThreadRoot, &root); err != nil || root.Channel == "" || root.TS == "" {
		return nil, sink.Permanent(fmt.Errorf("thread %q: its first message's receipt holds no channel and ts", d.ThreadKey))
	}
	return &root, nil
}

// channelOf is where m goes: its thread's channel (a reply lives where
// its thread started), else the payload's channel, else the sink's.
func (s *Sink) channelOf(m message, root *threadRoot) string {
	switch {
	case root != nil:
		return root.Channel
	case m.Channel != "":
		return m.Channel
	}
	return s.opts.Channel
}

// updateRoot edits the thread's first message to m's text and blocks.
func (s *Sink) updateRoot(ctx context.Context, root *threadRoot, m message) error {
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(m.Text, false)}
	if len(m.blocks.BlockSet) > 0 {
		opts = append(opts, slackapi.MsgOptionBlocks(m.blocks.BlockSet...))
	}
	_, _, _, err := s.api.UpdateMessageContext(ctx, root.Channel, root.TS, opts...)
	return classify(s.call("chat.update", root.Channel), err)
}

var _ sink.RateKeyer = (*Sink)(nil)

// webhookRateKey is the rate key of every post of a sink in
// incoming-webhook mode.
const webhookRateKey = "incoming-webhook"

// RateKey is the channel a delivery posts to, for rate_limit.per_key
// (Slack limits posting per channel): a reply's thread's channel, else the
// payload's, else the sink's. A channel named two ways ("#ops" and its ID)
// counts as two keys.
func (s *Sink) RateKey(d *sink.Delivery) (string, error) {
	m, err := parsePayload(d.Payload, s.opts.EscapeMentions)
	if err != nil {
		return "", s.fail(d, err)
	}
	if s.api == nil {
		// An incoming webhook posts to the one channel it is bound to (its
		// URL is a secret: it must not become a key in the database).
		return webhookRateKey, nil
	}
	root, err := parseThreadRoot(d)
	if err != nil {
		return "", s.fail(d, err)
	}
	channel := s.channelOf(m, root)
	if err := s.checkChannel(channel); err != nil {
		return "", s.fail(d, err)
	}
	return channel, nil
}

// Shape is the payload routes render for Slack: text, blocks (a
// template producing a Block Kit array) and channel; one of text and
// blocks is required. Slack posts threads, so a target may set
// update_root.
func Shape() sink.Shape {
	return sink.Shape{
		Fields:  map[string]sink.FieldKind{"text": sink.Text, "blocks": sink.JSON, "channel": sink.Text},
		OneOf:   []string{"text", "blocks"},
		Threads: true,
	}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }
