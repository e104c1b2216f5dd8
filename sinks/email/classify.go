package email

import (
	"errors"

	"github.com/wneessen/go-mail"

	"github.com/outboxd/outboxd/core/sink"
)

// classify maps an error from go-mail's DialAndSend to a delivery outcome.
//
//   - A 5xx reply to MAIL FROM, RCPT TO or the content is the server's
//     final word on this mail: permanent.
//   - go-mail's own refusals before talking to the server (no sender, no
//     recipients, 8BITMIME unsupported) cannot change on retry: permanent.
//   - Everything else (4xx replies, refused or dropped connections,
//     timeouts, TLS and AUTH failures) is retryable: the server, the network
//     or its configuration may recover.
func classify(err error) error {
	var se *mail.SendError
	if !errors.As(err, &se) {
		return err
	}
	if code := se.ErrorCode(); code >= 500 && code <= 599 {
		return sink.Permanent(err)
	}
	switch se.Reason {
	case mail.ErrGetSender, mail.ErrGetRcpts, mail.ErrNoUnencoded:
		return sink.Permanent(err)
	}
	return err
}
