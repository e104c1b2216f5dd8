package discord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
)

// Payload is the JSON a discord sink delivers; see the package
// documentation for examples. Content (or Text) or Embeds must be set.
type Payload struct {
	// Content is the message's text, at most MaxContentRunes characters.
	Content string `json:"content,omitempty"`
	// Text is Content under the name a plain string enqueued by a producer
	// is stored with ({"text": ...}); set one of the two.
	Text string `json:"text,omitempty"`
	// Embeds is an array of at most MaxEmbeds embed objects, passed to
	// Discord as they are.
	Embeds json.RawMessage `json:"embeds,omitempty"`
	// Username and AvatarURL override the sink's options.
	Username  string `json:"username,omitempty"`
	AvatarURL string `json:"avatar_url,omitempty"`
	// ThreadID posts into that existing thread of the webhook's channel.
	ThreadID string `json:"thread_id,omitempty"`
	// ThreadName creates a thread of that name in a forum or media
	// channel, with this message as its first.
	ThreadName string `json:"thread_name,omitempty"`
	// UpdateRoot, on a row of a thread that is not its first, also edits
	// the thread's first message to this message's content and embeds.
	// Routes set it with update_root: true.
	UpdateRoot bool `json:"update_root,omitempty"`
}

// parsePayload decodes and checks a delivery's payload against Discord's
// rules. Its errors are permanent: Discord refuses the same bytes again.
func parsePayload(raw json.RawMessage) (Payload, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, sink.Permanent(fmt.Errorf("payload: want {\"content\", \"embeds\", \"username\", \"avatar_url\", \"thread_id\", \"thread_name\", \"update_root\"}: %w", err))
	}
	if err := p.check(); err != nil {
		return p, sink.Permanent(fmt.Errorf("payload: %w", err))
	}
	return p, nil
}

// check applies Discord's documented limits, and moves Text to Content.
func (p *Payload) check() error {
	if p.Text != "" {
		if p.Content != "" {
			return errors.New("set content or text, not both (text is content's other name)")
		}
		p.Content, p.Text = p.Text, ""
	}
	if n := len([]rune(p.Content)); n > MaxContentRunes {
		return fmt.Errorf("content: %d characters, Discord takes at most %d", n, MaxContentRunes)
	}
	embeds, err := countEmbeds(p.Embeds)
	if err != nil {
		return err
	}
	if embeds == 0 {
		p.Embeds = nil
	}
	if p.Content == "" && embeds == 0 {
		return errors.New("has neither content nor embeds: Discord refuses an empty message")
	}
	if err := checkUsername(p.Username); err != nil {
		return fmt.Errorf("username: %w", err)
	}
	if err := checkSnowflake(p.ThreadID); err != nil {
		return fmt.Errorf("thread_id: %w", err)
	}
	if n := len([]rune(p.ThreadName)); n > MaxThreadName {
		return fmt.Errorf("thread_name: %d characters, Discord takes at most %d", n, MaxThreadName)
	}
	if p.ThreadID != "" && p.ThreadName != "" {
		return errors.New("set thread_id (an existing thread) or thread_name (a new one in a forum channel), not both")
	}
	return nil
}

// countEmbeds returns how many embeds raw holds: an array of at most
// MaxEmbeds objects, or nothing (absent or null).
func countEmbeds(raw json.RawMessage) (int, error) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return 0, nil
	}
	var embeds []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &embeds); err != nil {
		return 0, fmt.Errorf("embeds: want an array of embed objects: %w", err)
	}
	if len(embeds) > MaxEmbeds {
		return 0, fmt.Errorf("embeds: %d, Discord takes at most %d", len(embeds), MaxEmbeds)
	}
	return len(embeds), nil
}

// Shape is the payload routes render for Discord: content, embeds (a
// template producing an array of embed objects), username, avatar_url,
// thread_id and thread_name; one of content and embeds is required. A
// thread's later rows post into the thread its first row created, so a
// target may set update_root.
func Shape() sink.Shape {
	return sink.Shape{
		Fields: map[string]sink.FieldKind{
			"content": sink.Text, "embeds": sink.JSON, "username": sink.Text,
			"avatar_url": sink.Text, "thread_id": sink.Text, "thread_name": sink.Text,
		},
		OneOf:   []string{"content", "embeds"},
		Threads: true,
	}
}
