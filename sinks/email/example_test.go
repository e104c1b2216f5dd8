package email_test

import (
	"fmt"

	"github.com/outboxd/outboxd/sinks/email"
)

// New builds a named instance from options, as the type "email" in
// plugins.yaml does.
func Example() {
	sink, err := email.New("ops-mail", map[string]any{
		"smtp":           "mail.example.com:587",
		"username":       "outboxd",
		"password":       "from-the-environment",
		"from":           "Outbox <outbox@example.com>",
		"to":             []any{"ops@example.com"},
		"subject_prefix": "[outboxd]",
	})
	fmt.Println(sink != nil, err)

	// A typo in an option is refused, naming it.
	_, err = email.New("ops-mail", map[string]any{
		"smtp": "mail.example.com:587", "from": "outbox@example.com", "tls": "ssl",
	})
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
