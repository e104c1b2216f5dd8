package fakeslack

import (
	"net/http"
	"slices"
	"strings"
)

// Channel is a conversation the fake knows by name. Channels not added are
// still accepted by ID (any ID is an empty channel), but only added ones can
// be addressed by name or appear in conversations.list.
type Channel struct {
	ID       string // e.g. C0123ABCD
	Name     string // without the leading '#'
	Private  bool   // listed under types=private_channel, not public_channel
	Archived bool   // left out by exclude_archived
}

// Types of conversations.list's types parameter the fake understands.
const (
	TypePublic  = "public_channel"
	TypePrivate = "private_channel"
)

// AddChannel makes a channel known by name: chat.postMessage to "#name" (or
// "name") posts to its ID and answers with the ID, as Slack does, and
// conversations.list lists it. A post to an archived channel is refused
// with is_archived.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels = append(s.channels, c)
}

// resolve turns a chat.postMessage channel into the ID the message is
// stored under, or a Slack error: a known name becomes its ID, an unknown
// "#name" is channel_not_found, an archived channel is_archived, anything
// else is taken as an ID.
func (s *Server) resolve(channel string) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := strings.TrimPrefix(channel, "#")
	for _, c := range s.channels {
		if c.Name == name || c.ID == channel {
			if c.Archived {
				return "", "is_archived"
			}
			return c.ID, ""
		}
	}
	if channel == "" || strings.HasPrefix(channel, "#") {
		return "", "channel_not_found"
	}
	return channel, ""
}

// list serves conversations.list: the added channels of the requested types
// (public_channel when none are named), without archived ones when
// exclude_archived is set, a page at a time (limit, cursor).
func (s *Server) list(r *http.Request) (map[string]any, string) {
	types := strings.Split(r.Form.Get("types"), ",")
	if r.Form.Get("types") == "" {
		types = []string{TypePublic}
	}
	excludeArchived := isTrue(r.Form.Get("exclude_archived"))
	s.mu.Lock()
	out := []map[string]any{}
	for _, c := range s.channels {
		kind := TypePublic
		if c.Private {
			kind = TypePrivate
		}
		if !slices.Contains(types, kind) || (excludeArchived && c.Archived) {
			continue
		}
		out = append(out, map[string]any{
			"id": c.ID, "name": c.Name, "name_normalized": c.Name, "is_channel": true,
			"is_private": c.Private, "is_archived": c.Archived,
		})
	}
	s.mu.Unlock()
	return page(r, "channels", out)
}
