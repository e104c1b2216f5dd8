package fakeslack_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// A test points slack-go at the fake, injects a 429 and reads back what was
// posted.
func Example() {
	fake := fakeslack.New()
	defer fake.Close()
	api := slackapi.New(fakeslack.Token, slackapi.OptionAPIURL(fake.APIURL()))
	ctx := context.Background()

	fake.Inject(fakeslack.MethodPostMessage, fakeslack.Fault{Status: 429, RetryAfter: 3 * time.Second})
	_, _, err := api.PostMessageContext(ctx, "C0123ABCD", slackapi.MsgOptionText("hello", false))
	var rl *slackapi.RateLimitedError
	fmt.Println("rate limited:", errors.As(err, &rl), rl.RetryAfter)

	_, _, err = api.PostMessageContext(ctx, "C0123ABCD", slackapi.MsgOptionText("hello", false),
		slackapi.MsgOptionMetadata(slackapi.SlackMetadata{EventType: "demo", EventPayload: map[string]any{"k": "v"}}))
	fmt.Println("posted:", err == nil)
	for _, p := range fake.Posts() {
		fmt.Println(p.Channel, p.Text, p.Metadata.EventType, p.Metadata.EventPayload["k"])
	}
	// Output:
	// rate limited: true 3s
	// posted: true
	// C0123ABCD hello demo v
}
