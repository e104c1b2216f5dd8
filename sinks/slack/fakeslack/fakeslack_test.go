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

func TestListPaginatesFiltersAndResolvesNames(t *testing.T) {
	t.Parallel()
	fake := fakeslack.New()
	t.Cleanup(fake.Close)
	fake.AddChannel(fakeslack.Channel{ID: "C1", Name: "general"})
	fake.AddChannel(fakeslack.Channel{ID: "G2", Name: "secret", Private: true})
	fake.AddChannel(fakeslack.Channel{ID: "C3", Name: "old", Archived: true})
	fake.AddChannel(fakeslack.Channel{ID: "C4", Name: "alerts"})
	api := slackapi.New(fakeslack.Token, slackapi.OptionAPIURL(fake.APIURL()))
	ctx := context.Background()

	var names []string
	params := &slackapi.GetConversationsParameters{
		Types: []string{fakeslack.TypePublic, fakeslack.TypePrivate}, ExcludeArchived: true, Limit: 1,
	}
	for pages := 0; ; pages++ {
		chans, next, err := api.GetConversationsContext(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chans {
			names = append(names, c.Name+"="+c.ID)
		}
		if next == "" {
			if pages != 2 {
				t.Errorf("pages = %d, want 3 of one channel", pages+1)
			}
			break
		}
		params.Cursor = next
	}
	if want := []string{"general=C1", "secret=G2", "alerts=C4"}; !slices.Equal(names, want) {
		t.Errorf("list = %v, want %v", names, want)
	}
	public, _, err := api.GetConversationsContext(ctx, &slackapi.GetConversationsParameters{})
	if err != nil || len(public) != 3 {
		t.Errorf("default types: %d channels (%v), want the 3 public ones", len(public), err)
	}

	channel, _, err := api.PostMessageContext(ctx, "#alerts", slackapi.MsgOptionText("hi", false))
	if err != nil || channel != "C4" {
		t.Errorf("post to #alerts answered channel %q (%v), want C4", channel, err)
	}
	if _, _, err := api.PostMessageContext(ctx, "#nowhere", slackapi.MsgOptionText("hi", false)); err == nil {
		t.Errorf("post to an unknown name succeeded")
	}
	if _, err := api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{ChannelID: "#alerts"}); err == nil {
		t.Errorf("history accepted a channel name")
	}
}
