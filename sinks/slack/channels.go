package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
)

// Channel name resolution bounds. chat.postMessage accepts "#name", but
// conversations.history only takes IDs, so the duplicate check of a retried
// row looks the name up with conversations.list.
const (
	// ChannelListPageSize is the page size of a conversations.list scan
	// (Slack advises at most 200).
	ChannelListPageSize = 200
	// ChannelListMaxPages bounds one scan: a name not among the first
	// ChannelListMaxPages*ChannelListPageSize channels is treated as
	// unresolvable (see errUnresolved).
	ChannelListMaxPages = 20
)

// channelListTypes are the conversation types a "#name" may denote.
var channelListTypes = []string{"public_channel", "private_channel"}

// errUnresolved marks a channel name that cannot be turned into an ID: it is
// not listed, or the token lacks channels:read/groups:read. The post itself
// may still work, so the sink posts without the duplicate check rather than
// failing the row.
var errUnresolved = errors.New("channel name not resolved to an ID")

// channelName returns the name a channel refers to, without '#', and false
// for an ID. IDs (C0123ABCD, G..., D...) are upper-case letters and digits;
// Slack's channel names are lower-case, so anything else is a name.
func channelName(channel string) (string, bool) {
	if name, ok := strings.CutPrefix(channel, "#"); ok {
		return strings.ToLower(name), true
	}
	for _, r := range channel {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return strings.ToLower(channel), true
		}
	}
	return "", false
}

// channelCache maps channel names to IDs. It is filled by chat.postMessage
// answers (which name the ID) and by conversations.list scans; it is safe for
// concurrent use, and runs one scan at a time so that a burst of retries
// after a crash costs one scan, not one each.
type channelCache struct {
	mu   sync.RWMutex
	ids  map[string]string // lower-case name without '#' -> ID
	scan chan struct{}     // a token held by the running scan
}

func newChannelCache() *channelCache {
	return &channelCache{ids: map[string]string{}, scan: make(chan struct{}, 1)}
}

func (c *channelCache) get(name string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[name]
	return id, ok
}

func (c *channelCache) put(name, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[name] = id
}

// learn caches the ID Slack answered for a post to channel, when channel
// was a name.
func (s *Sink) learn(channel, id string) {
	if name, ok := channelName(channel); ok && id != "" {
		s.channels.put(name, id)
	}
}

// channelID returns the ID to read channel's history with: channel itself
// when it is an ID, else the cached or listed ID of the name. A name that
// cannot be resolved yields an error wrapping errUnresolved; a transient
// failure of the scan is returned classified, to be retried.
func (s *Sink) channelID(ctx context.Context, channel string) (string, error) {
	name, isName := channelName(channel)
	if !isName {
		return channel, nil
	}
	if id, ok := s.channels.get(name); ok {
		return id, nil
	}
	select {
	case s.channels.scan <- struct{}{}:
		defer func() { <-s.channels.scan }()
	case <-ctx.Done():
		return "", fmt.Errorf("resolving channel %s: %w", channel, ctx.Err())
	}
	if id, ok := s.channels.get(name); ok { // another delivery's scan found it
		return id, nil
	}
	return s.scanChannels(ctx, channel, name)
}

// scanChannels pages through conversations.list, caching every channel it
// sees, until it finds name.
func (s *Sink) scanChannels(ctx context.Context, channel, name string) (string, error) {
	params := &slackapi.GetConversationsParameters{
		Types: channelListTypes, ExcludeArchived: true, Limit: ChannelListPageSize,
	}
	for range ChannelListMaxPages {
		chans, next, err := s.api.GetConversationsContext(ctx, params)
		if err != nil {
			err = classify(s.call("conversations.list", channel), err)
			if sink.IsPermanent(err) { // missing_scope, ...: the post may still work
				return "", fmt.Errorf("%w: %w", errUnresolved, err)
			}
			return "", err
		}
		id := ""
		for _, c := range chans {
			s.channels.put(strings.ToLower(c.Name), c.ID)
			if strings.EqualFold(c.Name, name) {
				id = c.ID
			}
		}
		if id != "" {
			return id, nil
		}
		if next == "" {
			return "", fmt.Errorf("%w: %s is not among the bot's visible, unarchived channels", errUnresolved, channel)
		}
		params.Cursor = next
	}
	return "", fmt.Errorf("%w: %s not found in the first %d channels listed", errUnresolved, channel, ChannelListMaxPages*ChannelListPageSize)
}
