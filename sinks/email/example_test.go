package email_test

import (
	"fmt"

	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/email"
)

// Importing the package registers the "email" type; plugins.yaml (or a
// program) then builds named instances from options.
func Example() {
	sink, err := registry.Build(email.Type, "ops-mail", map[string]any{
		"smtp":           "mail.example.com:587",
		"username":       "outboxd",
		"password":       "from-the-environment",
		"from":           "Outbox <outbox@example.com>",
		"to":             []any{"ops@example.com"},
		"subject_prefix": "[outboxd]",
	})
	fmt.Println(sink != nil, err)

	// A typo in an option is refused, naming it.
	_, err = registry.Build(email.Type, "ops-mail", map[string]any{
		"smtp": "mail.example.com:587", "from": "outbox@example.com", "tls": "ssl",
	})
	fmt.Println(err)
	// Output:
	// true <nil>
	// sink "ops-mail" (type email): option tls: "ssl" is not one of starttls, tls, none
}

// Every attempt at the row with dedup key "order-42" for the sink
// "ops-mail" sends a mail with this Message-ID.
func ExampleMessageID() {
	fmt.Println(email.MessageID("ops-mail", "order-42", "example.com"))
	// Output: <35fef60665bb7d19aa1215b4efd2e600@example.com>
}
