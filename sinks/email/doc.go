// Package email is the SMTP sink (`type: email`, defined by [Type]): each
// outbox row becomes one mail, composed and sent with
// github.com/wneessen/go-mail.
//
// # Options
//
//	smtp:           mail.example.com:587   # host:port of the SMTP server (required)
//	username:       outboxd                # SMTP AUTH user; no AUTH when empty
//	password:       ${SMTP_PASSWORD}       # never logged, never in errors
//	tls:            starttls               # starttls (default), tls (implicit, port 465), none
//	from:           "Outbox <outbox@example.com>"   # required
//	to:             [ops@example.com]      # default recipients
//	subject_prefix: "[outboxd]"            # prepended to every subject, followed by a space
//	allowed_recipient_domains: [example.com]   # optional: the only domains mail may go to
//
// With credentials, the authentication mechanism is discovered from the
// server; over an unencrypted connection (tls: none) only mechanisms that do
// not reveal the password (SCRAM, CRAM-MD5) are used.
//
// # Payload
//
//	{"subject": "Disk full", "text": "…", "html": "<p>…</p>", "to": ["a@example.com"], "cc": ["b@example.com"]}
//
// At least one of text and html is required; with both, the mail is
// multipart/alternative. The payload's to replaces the configured one;
// cc adds copies. to and cc accept a list or a single string. A plain string
// enqueued as the payload arrives as {"text": ...} and goes to the
// configured recipients.
//
// So whoever can enqueue to the sink chooses who gets mail from your
// sender address. To keep that to your own people, set
// allowed_recipient_domains: every address of to and cc (and of the to
// option) must then be at one of the listed domains, compared without
// regard to case and exactly (list sub.example.com separately); a payload
// naming any other fails permanently and nothing is sent.
//
// # Delivery
//
// Every mail carries a Message-ID derived from the sink name and the row's
// dedup key (see [MessageID]), so a retry of a row whose earlier attempt did
// get through is recognisable as the same mail to the recipient's server and
// client. The Date header is the time the row was enqueued, for the same
// reason.
//
// SMTP replies map to outcomes like this: a 5xx reply to the sender,
// recipients or content is permanent (the row is dead-lettered); 4xx
// replies, connection, TLS and authentication failures are retried. A
// payload that can never be sent (no recipients, no body, an invalid
// address) is permanent. The receipt of a sent mail records its Message-ID
// and the server's final reply (which usually names the queue id).
//
// The SMTP exchange is traced as its own client span ("smtp send"), a child
// of the relay's delivery span.
package email
