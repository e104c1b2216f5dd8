package email

import (
	"fmt"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
)

// userAgent replaces go-mail's default X-Mailer/User-Agent, which names the
// library and its version.
const userAgent = "outboxd"

// compose builds the mail for one delivery: sender, recipients, subject,
// bodies and the deterministic headers (Message-ID, Date), and, for a
// reply in a thread, In-Reply-To and References naming root, the thread's
// first mail's Message-ID ("" for none), so mail clients group them.
func (s *Sink) compose(p Payload, messageID, root string, created time.Time) (*mail.Msg, error) {
	m := mail.NewMsg()
	if err := m.From(s.cfg.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if err := m.To(p.To...); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	if len(p.Cc) > 0 {
		if err := m.Cc(p.Cc...); err != nil {
			return nil, fmt.Errorf("cc: %w", err)
		}
	}
	m.Subject(s.subject(p.Subject))
	// SetMessageIDWithValue adds the angle brackets itself.
	m.SetMessageIDWithValue(strings.Trim(messageID, "<>"))
	if created.IsZero() {
		m.SetDate()
	} else {
		m.SetDateWithValue(created)
	}
	m.SetUserAgent(userAgent)
	if root != "" {
		m.SetGenHeader(mail.HeaderInReplyTo, root)
		m.SetGenHeader(mail.HeaderReferences, root)
	}

	switch {
	case p.Text != "" && p.HTML != "":
		m.SetBodyString(mail.TypeTextPlain, p.Text)
		m.AddAlternativeString(mail.TypeTextHTML, p.HTML)
	case p.HTML != "":
		m.SetBodyString(mail.TypeTextHTML, p.HTML)
	default:
		m.SetBodyString(mail.TypeTextPlain, p.Text)
	}
	return m, nil
}

// subject joins the configured prefix and the payload's subject.
func (s *Sink) subject(subject string) string {
	switch {
	case s.cfg.SubjectPrefix == "":
		return subject
	case subject == "":
		return s.cfg.SubjectPrefix
	default:
		return s.cfg.SubjectPrefix + " " + subject
	}
}
