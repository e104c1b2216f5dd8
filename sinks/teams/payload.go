package teams

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
)

// What Teams takes in one message.
const (
	// MaxMessageBytes is Teams' documented size limit of one message,
	// 28 KB, card included; the sink refuses a larger message rather than
	// have the workflow fail after it answered 202.
	MaxMessageBytes = 28 * 1024
	// CardVersion is the Adaptive Card schema version of the cards the
	// sink lays out: the highest every Teams client (desktop, web,
	// mobile) renders.
	CardVersion = "1.4"
	// CardContentType is the attachment content type of an Adaptive Card.
	CardContentType = "application/vnd.microsoft.card.adaptive"
	// cardType is an Adaptive Card's type.
	cardType = "AdaptiveCard"
)

// Payload is the JSON a teams sink delivers: a title and a text, which
// the sink lays out as an Adaptive Card, or a card of the producer's own.
type Payload struct {
	// Title is shown in bold above the text.
	Title string `json:"title,omitempty"`
	// Text is the message; Teams renders a subset of Markdown in it.
	Text string `json:"text,omitempty"`
	// Card is a whole Adaptive Card ({"type": "AdaptiveCard", "version",
	// "body", ...}), posted as it is; it excludes Title and Text.
	Card json.RawMessage `json:"card,omitempty"`
}

// message decodes and checks a delivery's payload and returns the body a
// Workflows webhook takes: a message with the card as its one attachment.
// Its errors are permanent: retrying the same bytes cannot help.
func message(raw json.RawMessage) ([]byte, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, sink.Permanent(fmt.Errorf("payload: want {\"title\", \"text\"} or {\"card\"}: %w", err))
	}
	card, err := p.card()
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("payload: %w", err))
	}
	body, err := json.Marshal(envelope{Type: "message", Attachments: []attachment{{ContentType: CardContentType, Content: card}}})
	if err != nil {
		return nil, sink.Permanent(fmt.Errorf("payload: %w", err))
	}
	if len(body) > MaxMessageBytes {
		return nil, sink.Permanent(fmt.Errorf("payload: the message takes %d bytes, Teams takes at most %d", len(body), MaxMessageBytes))
	}
	return body, nil
}

// envelope is the body of a Workflows webhook request.
type envelope struct {
	Type        string       `json:"type"`
	Attachments []attachment `json:"attachments"`
}

type attachment struct {
	ContentType string          `json:"contentType"`
	ContentURL  *string         `json:"contentUrl"` // always null: the card is inline
	Content     json.RawMessage `json:"content"`
}

// card returns the Adaptive Card the payload describes.
func (p Payload) card() (json.RawMessage, error) {
	if len(p.Card) > 0 && !bytes.Equal(bytes.TrimSpace(p.Card), []byte("null")) {
		if p.Title != "" || p.Text != "" {
			return nil, errors.New("card excludes title and text: put them in the card")
		}
		return p.Card, checkCard(p.Card)
	}
	if p.Title == "" && p.Text == "" {
		return nil, errors.New("has neither title, text nor card")
	}
	var body []textBlock
	if p.Title != "" {
		body = append(body, textBlock{Type: "TextBlock", Text: p.Title, Weight: "Bolder", Size: "Medium", Wrap: true})
	}
	if p.Text != "" {
		body = append(body, textBlock{Type: "TextBlock", Text: p.Text, Wrap: true})
	}
	return json.Marshal(struct {
		Type    string      `json:"type"`
		Version string      `json:"version"`
		Body    []textBlock `json:"body"`
	}{cardType, CardVersion, body})
}

// textBlock is an Adaptive Card's TextBlock element.
type textBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Weight string `json:"weight,omitempty"`
	Size   string `json:"size,omitempty"`
	Wrap   bool   `json:"wrap"`
}

// checkCard refuses what Teams would not render as an Adaptive Card: a
// card that is not an object of type AdaptiveCard with a version.
func checkCard(raw json.RawMessage) error {
	var c struct {
		Type    string `json:"type"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("card: want an Adaptive Card object: %w", err)
	}
	if c.Type != cardType {
		return fmt.Errorf("card: type is %q, want %q", c.Type, cardType)
	}
	if c.Version == "" {
		return errors.New("card: has no version (Teams renders up to " + CardVersion + " everywhere)")
	}
	return nil
}

// Shape is the payload routes render for Teams: title and text, or card
// (a template producing a whole Adaptive Card). A target may go without
// a template (no OneOf): it posts the event's type and key as the title
// and its data as the text.
func Shape() sink.Shape {
	return sink.Shape{
		Fields:      map[string]sink.FieldKind{"title": sink.Text, "text": sink.Text, "card": sink.JSON},
		Untemplated: untemplated,
	}
}

// untemplated is the payload of a target without a template.
func untemplated(ev sink.Event) (json.RawMessage, error) {
	p := Payload{Title: ev.Type + " " + ev.Key, Text: string(ev.Data)}
	if p.Text == "" {
		p.Text = "{}"
	}
	return json.Marshal(p)
}
