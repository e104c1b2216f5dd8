package email

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
)

// Payload is what a producer enqueues for an email sink.
type Payload struct {
	// Subject is prefixed with the sink's subject_prefix.
	Subject string `json:"subject,omitempty"`
	// Text is the plain-text body.
	Text string `json:"text,omitempty"`
	// HTML is the HTML body; with Text, the mail is multipart/alternative.
	HTML string `json:"html,omitempty"`
	// To replaces the sink's configured recipients when not empty; the
	// allowed_recipient_domains option restricts it.
	To AddressList `json:"to,omitempty"`
	// Cc receives copies, restricted like To.
	Cc AddressList `json:"cc,omitempty"`
}

// AddressList is a list of mail addresses that also decodes from a single
// JSON string, so {"to": "a@example.com"} works as well as a list.
type AddressList []string

// UnmarshalJSON accepts a string or an array of strings.
func (l *AddressList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = AddressList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a mail address or a list of them")
	}
	*l = many
	return nil
}

// parsePayload decodes and checks a row's payload against the sink's
// configuration. defaultTo is used when the payload names no recipients.
// Every error it returns describes a payload that no retry can send.
func parsePayload(raw json.RawMessage, defaultTo []string) (Payload, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	// An unknown field is most likely a typo ("body" for "text"); sending a
	// mail without the intended content would be worse than refusing it.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("payload: %w", err)
	}
	if dec.More() {
		return p, errors.New("payload: trailing data after the JSON object")
	}
	if p.Text == "" && p.HTML == "" {
		return p, errors.New("payload: neither text nor html is set")
	}
	if len(p.To) == 0 {
		p.To = defaultTo
	}
	if len(p.To) == 0 {
		return p, errors.New("payload: no recipients (set to in the payload or the sink's to option)")
	}
	if err := checkAddresses("to", p.To); err != nil {
		return p, err
	}
	if err := checkAddresses("cc", p.Cc); err != nil {
		return p, err
	}
	return p, nil
}

func checkAddresses(field string, addrs []string) error {
	for i, a := range addrs {
		if _, err := mail.ParseAddress(a); err != nil {
			return fmt.Errorf("payload: %s[%d]: %q is not a mail address: %w", field, i, a, err)
		}
	}
	return nil
}
