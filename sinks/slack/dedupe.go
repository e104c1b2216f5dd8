package slack

import (
	"context"
	"fmt"
	"strconv"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
)

// MetadataEventType is the event_type of the metadata every post carries.
// Its event_payload holds MetadataKeySink, MetadataKeyDedup and
// MetadataKeyID, which is how a retry recognises an earlier post of its row.
const MetadataEventType = "outbox_delivery"

// The event_payload keys of a post's metadata.
const (
	MetadataKeySink  = "sink"
	MetadataKeyDedup = "dedup_key"
	MetadataKeyID    = "outbox_id"
)

// History lookup bounds.
const (
	// HistorySkew is subtracted from the row's creation time (database
	// clock) before asking Slack (Slack's clock) for messages since then, so
	// clock skew cannot hide an earlier post.
	HistorySkew = time.Minute
	// HistoryPageSize is the page size of a history lookup.
	HistoryPageSize = 200
	// HistoryMaxPages bounds a lookup; a channel busier than
	// HistoryMaxPages*HistoryPageSize messages since the row was created is
	// not searched further and the message is posted (at-least-once).
	HistoryMaxPages = 10
)

// metadata is what a post of d carries.
func metadata(d *sink.Delivery) slackapi.SlackMetadata {
	return slackapi.SlackMetadata{
		EventType: MetadataEventType,
		EventPayload: map[string]any{
			MetadataKeySink:  d.Sink,
			MetadataKeyDedup: d.DedupKey,
			MetadataKeyID:    d.ID,
		},
	}
}

// isPostOf reports whether m is a post of delivery d.
func isPostOf(m slackapi.Message, d *sink.Delivery) bool {
	md := m.Metadata
	return md.EventType == MetadataEventType &&
		md.EventPayload[MetadataKeySink] == d.Sink &&
		md.EventPayload[MetadataKeyDedup] == d.DedupKey
}

// earlierPost resolves channel to its ID and looks there for an earlier post
// of d, returning the ID and the post's ts ("" when there is none). An
// unresolvable channel name yields an error wrapping errUnresolved.
func (s *Sink) earlierPost(ctx context.Context, d *sink.Delivery, channel, threadTS string) (id, ts string, err error) {
	if id, err = s.channelID(ctx, channel); err != nil {
		return "", "", err
	}
	ts, err = s.findPost(ctx, d, id, threadTS)
	return id, ts, err
}

// findPost looks for an earlier post of d in channel (in the thread when
// threadTS is set, since thread replies are not in conversations.history)
// and returns its ts, or "" when there is none. channel must be an ID.
func (s *Sink) findPost(ctx context.Context, d *sink.Delivery, channel, threadTS string) (string, error) {
	oldest := ""
	if !d.CreatedAt.IsZero() {
		oldest = slackTS(d.CreatedAt.Add(-HistorySkew))
	}
	cursor := ""
	for range HistoryMaxPages {
		msgs, next, err := s.historyPage(ctx, channel, threadTS, oldest, cursor)
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			if isPostOf(m, d) {
				return m.Timestamp, nil
			}
		}
		if next == "" {
			return "", nil
		}
		cursor = next
	}
	return "", nil
}

// historyPage fetches one page of the channel's history, or of a thread.
func (s *Sink) historyPage(ctx context.Context, channel, threadTS, oldest, cursor string) ([]slackapi.Message, string, error) {
	if threadTS != "" {
		msgs, _, next, err := s.api.GetConversationRepliesContext(ctx, &slackapi.GetConversationRepliesParameters{
			ChannelID: channel, Timestamp: threadTS, Oldest: oldest, Cursor: cursor,
			Limit: HistoryPageSize, IncludeAllMetadata: true,
		})
		return msgs, next, classify(s.call("conversations.replies", channel), err)
	}
	resp, err := s.api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{
		ChannelID: channel, Oldest: oldest, Cursor: cursor,
		Limit: HistoryPageSize, IncludeAllMetadata: true,
	})
	if err != nil {
		return nil, "", classify(s.call("conversations.history", channel), err)
	}
	return resp.Messages, resp.ResponseMetaData.NextCursor, nil
}

// slackTS formats t as a Slack timestamp ("seconds.microseconds").
func slackTS(t time.Time) string {
	us := t.UnixMicro()
	return strconv.FormatInt(us/1_000_000, 10) + "." + fmt.Sprintf("%06d", us%1_000_000)
}
