package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// A slack sink posts a delivery and records where the message went. A second,
// uncertain attempt at the same row finds the first post in the channel's
// history and does not post again. The channel is given by name; the sink
// learns its ID from Slack's answer to the post, as history needs the ID.
func Example() {
	fake := fakeslack.New() // stands in for https://slack.com/api/
	defer fake.Close()
	fake.AddChannel(fakeslack.Channel{ID: "C0123ABCD", Name: "alerts"})

	s, err := slack.Type.New("alerts", map[string]any{
		"token":   fakeslack.Token,
		"api_url": fake.APIURL(),
		"channel": "#alerts",
	}, sink.Env{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := &sink.Delivery{
		ID: 42, Sink: "alerts", DedupKey: "order-42-shipped",
		Payload: json.RawMessage(`{"text":"Order 42 shipped"}`),
		Attempt: 1, CreatedAt: time.Now(),
	}
	if err := s.Deliver(context.Background(), d); err != nil {
		fmt.Println(err)
		return
	}
	var r struct{ Channel, TS string }
	_ = json.Unmarshal(d.Receipt(), &r)
	fmt.Println("posted to", r.Channel, "ts set:", r.TS != "")

	// The relay died before recording the outcome; another one retries.
	d.Attempt, d.Uncertain = 2, true
	if err := s.Deliver(context.Background(), d); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("messages in Slack:", len(fake.Posts()))
	// Output:
	// posted to C0123ABCD ts set: true
	// messages in Slack: 1
}
