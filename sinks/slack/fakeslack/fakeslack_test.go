package fakeslack_test

import (
	"context"
	"slices"
	"testing"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

func TestHistoryHonoursOldestMetadataAndCursor(t *testing.T) {
	t.Parallel()
	fake := fakeslack.New()
	t.Cleanup(fake.Close)
	md := fakeslack.Metadata{EventType: "e", EventPayload: map[string]any{"k": "v"}}
	old := fake.Seed(fakeslack.Message{Channel: "C1", Text: "old", Metadata: md})
	for _, text := range []string{"a", "b", "c"} {
		fake.Seed(fakeslack.Message{Channel: "C1", Text: text, Metadata: md})
	}
	parent := fake.Seed(fakeslack.Message{Channel: "C1", Text: "parent"})
	fake.Seed(fakeslack.Message{Channel: "C1", Text: "reply", ThreadTS: parent.TS})
	fake.Seed(fakeslack.Message{Channel: "C2", Text: "elsewhere"})
	api := slackapi.New(fakeslack.Token, slackapi.OptionAPIURL(fake.APIURL()))
	ctx := context.Background()

	var texts []string
	params := &slackapi.GetConversationHistoryParameters{ChannelID: "C1", Oldest: old.TS, Limit: 2, IncludeAllMetadata: true}
	for {
		resp, err := api.GetConversationHistoryContext(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.Messages {
			texts = append(texts, m.Text)
			if m.Text != "parent" && m.Metadata.EventPayload["k"] != "v" {
				t.Errorf("message %q lost its metadata: %+v", m.Text, m.Metadata)
			}
		}
		if resp.ResponseMetaData.NextCursor == "" {
			break
		}
		params.Cursor = resp.ResponseMetaData.NextCursor
	}
	// Newest first, oldest exclusive, no thread replies, no other channel.
	if want := []string{"parent", "c", "b", "a"}; !slices.Equal(texts, want) {
		t.Errorf("history = %v, want %v", texts, want)
	}

	resp, err := api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{ChannelID: "C1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Messages {
		if m.Metadata.EventType != "" {
			t.Errorf("metadata returned without include_all_metadata: %+v", m.Metadata)
		}
	}

	replies, _, _, err := api.GetConversationRepliesContext(ctx, &slackapi.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: parent.TS})
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 2 || replies[0].Text != "parent" || replies[1].Text != "reply" {
		t.Errorf("replies = %+v, want parent then reply", replies)
	}
}
