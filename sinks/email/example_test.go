package email_test

import (
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/email"
)

// Type builds a named instance from options, as `type: email` in
// plugins.yaml does.
func Example() {
	s, err := email.Type.New("ops-mail", map[string]any{
		"smtp":           "mail.example.com:587",
		"username":       "outboxd",
		"password":       "from-the-environment",
		"from":           "Outbox <outbox@example.com>",
		"to":             []any{"ops@example.com"},
		"subject_prefix": "[outboxd]",
	}, sink.Env{})
	fmt.Println(s != nil, err)

	// A typo in an option is refused, naming it.
	_, err = email.Type.New("ops-mail", map[string]any{
		"smtp": "mail.example.com:587", "from": "outbox@example.com", "tls": "ssl",
	}, sink.Env{})
	fmt.Println(err)
	// Output:
	// true <nil>
	// option tls: "ssl" is not one of starttls, tls, none
}

// Every attempt at the row with dedup key "order-42" for the sink
// "ops-mail" sends a mail with this Message-ID.
func ExampleMessageID() {
	fmt.Println(email.MessageID("ops-mail", "order-42", "example.com"))
	// Output: <35fef60665bb7d19aa1215b4efd2e600@example.com>
}
