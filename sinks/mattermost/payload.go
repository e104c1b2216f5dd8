package mattermost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
)

// PropDeliveryID is the post prop that holds the delivery id: Mattermost
// keeps props with the post, where an integration reading posts through
// its API finds them.
const PropDeliveryID = "outboxd_delivery_id"

// Payload is the JSON a mattermost sink delivers: Mattermost's
// Slack-compatible incoming-webhook fields. Text or Attachments (or both)
// must be set.
type Payload struct {
	// Text is the message, in Mattermost's Markdown.
	Text string `json:"text,omitempty"`
	// Attachments are Slack-style message attachments ([{"fallback",
	// "color", "title", "text", "fields", ...}]), passed on as they are.
	Attachments json.RawMessage `json:"attachments,omitempty"`
	// Channel overrides the sink's channel option.
	Channel string `json:"channel,omitempty"`
}

// request is the body of an incoming-webhook request.
type request struct {
	Text        string            `json:"text,omitempty"`
	Channel     string            `json:"channel,omitempty"`
	Username    string            `json:"username,omitempty"`
	IconURL     string            `json:"icon_url,omitempty"`
	Attachments json.RawMessage   `json:"attachments,omitempty"`
	Props       map[string]string `json:"props"`
}

// body decodes and checks a delivery's payload and returns the request
// body for the webhook, with the sink's channel, username and icon and
// the delivery id in its props. Its errors are permanent: retrying the
// same bytes cannot help.
func (o Options) body(raw json.RawMessage, id string) ([]byte, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, sink.Permanent(fmt.Errorf("payload: want {\"text\", \"attachments\", \"channel\"}: %w", err))
	}
	attachments, err := checkAttachments(p.Attachments)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("payload: %w", err))
	}
	if p.Text == "" && attachments == nil {
		// Mattermost answers 400 to a post without either.
		return nil, sink.Permanent(errors.New("payload: has neither text nor attachments"))
	}
	r := request{Text: p.Text, Channel: o.Channel, Username: o.Username, IconURL: o.IconURL,
		Attachments: attachments, Props: map[string]string{PropDeliveryID: id}}
	if p.Channel != "" {
		r.Channel = p.Channel
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("payload: %w", err))
	}
	return b, nil
}

// checkAttachments returns the attachments when they are a non-empty
// array of objects, nil when there are none; anything else Mattermost
// would refuse.
func checkAttachments(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var list []map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("attachments: want an array of attachment objects: %w", err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	return raw, nil
}

// Shape is the payload routes render for Mattermost: text, attachments (a
// template producing a JSON array of attachments) and channel. A target
// may go without a template (no OneOf): it posts the event's type and key
// in bold and its data as a code block. A template that renders neither
// text nor attachments fails at delivery, permanently.
func Shape() sink.Shape {
	return sink.Shape{
		Fields:      map[string]sink.FieldKind{"text": sink.Text, "attachments": sink.JSON, "channel": sink.Text},
		Untemplated: untemplated,
	}
}

// untemplated is the payload of a target without a template.
func untemplated(ev sink.Event) (json.RawMessage, error) {
	data := string(ev.Data)
	if data == "" {
		data = "{}"
	}
	return json.Marshal(Payload{Text: fmt.Sprintf("**%s** %s\n```json\n%s\n```", ev.Type, ev.Key, data)})
}
