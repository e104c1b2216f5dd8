package sinks

import (
	"net/url"
	"slices"
	"strings"
)

// RedactedSecret stands in for a secret in an error's text.
const RedactedSecret = "[REDACTED]"

// Redactor removes a sink's secrets (a password, a token) from the text of
// errors that a client library produced, which might quote a connection
// URL or a credential. Sinks build their own errors without secrets; this
// is the safety net for the library's.
type Redactor struct{ secrets []string }

// NewRedactor returns a Redactor for the given secrets, each also in its
// URL-escaped forms. Empty secrets are ignored.
func NewRedactor(secrets ...string) Redactor {
	var r Redactor
	for _, s := range secrets {
		if s != "" {
			r.secrets = append(r.secrets, s, url.QueryEscape(s), url.PathEscape(s))
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	r.secrets = slices.Compact(r.secrets)
	return r
}

// Error returns err unchanged when its text holds no secret, and otherwise
// an error with the same chain (errors.Is and As still see the original)
// whose text has every secret replaced by RedactedSecret.
func (r Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	text := r.String(err.Error())
	if text == err.Error() {
		return err
	}
	return &redactedError{text: text, err: err}
}

// String returns s with every secret replaced by RedactedSecret.
func (r Redactor) String(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, RedactedSecret)
	}
	return s
}

type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }
