package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// postMessage serves chat.postMessage: it checks the fields Slack checks,
// records the message and answers with its channel and ts.
func (s *Server) postMessage(r *http.Request) (map[string]any, string) {
	m := Message{
		Channel:     r.Form.Get("channel"),
		Text:        r.Form.Get("text"),
		ThreadTS:    r.Form.Get("thread_ts"),
		Username:    r.Form.Get("username"),
		IconEmoji:   r.Form.Get("icon_emoji"),
		UnfurlLinks: r.Form.Get("unfurl_links"),
	}
	var slackErr string
	if m.Channel, slackErr = s.resolve(m.Channel); slackErr != "" {
		return nil, slackErr
	}
	if b := r.Form.Get("blocks"); b != "" {
		var blocks []json.RawMessage
		if json.Unmarshal([]byte(b), &blocks) != nil {
			return nil, "invalid_blocks"
		}
		m.Blocks = json.RawMessage(b)
	}
	if m.Text == "" && len(m.Blocks) == 0 && r.Form.Get("attachments") == "" {
		return nil, "no_text"
	}
	if md := r.Form.Get("metadata"); md != "" {
		if json.Unmarshal([]byte(md), &m.Metadata) != nil {
			return nil, "invalid_metadata_format"
		}
	}
	m = s.record(m)
	return map[string]any{"channel": m.Channel, "ts": m.TS, "message": wire(m, true)}, ""
}

// update serves chat.update: it replaces the text and blocks of the
// message at (channel, ts), keeping its metadata, as Slack does.
func (s *Server) update(r *http.Request) (map[string]any, string) {
	channel, ts, text, blocks := r.Form.Get("channel"), r.Form.Get("ts"), r.Form.Get("text"), r.Form.Get("blocks")
	if strings.HasPrefix(channel, "#") {
		return nil, "channel_not_found" // like Slack: chat.update takes IDs only
	}
	if blocks != "" {
		var list []json.RawMessage
		if json.Unmarshal([]byte(blocks), &list) != nil {
			return nil, "invalid_blocks"
		}
	}
	if text == "" && blocks == "" {
		return nil, "no_text"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.messages {
		m := &s.messages[i]
		if m.Channel == channel && m.TS == ts {
			m.Text, m.Blocks = text, nil
			if blocks != "" {
				m.Blocks = json.RawMessage(blocks)
			}
			m.Updates++
			return map[string]any{"channel": channel, "ts": ts, "text": text}, ""
		}
	}
	return nil, "message_not_found"
}

// history serves conversations.history: the channel's top-level messages
// newer than oldest (and older than latest), newest first, a page at a time.
func (s *Server) history(r *http.Request) (map[string]any, string) {
	channel := r.Form.Get("channel")
	if strings.HasPrefix(channel, "#") {
		return nil, "channel_not_found" // like Slack: history takes IDs only
	}
	msgs := s.selectMessages(r, func(m Message) bool {
		return m.Channel == channel && (m.ThreadTS == "" || m.ThreadTS == m.TS)
	})
	slices.Reverse(msgs)
	return page(r, "messages", wireAll(r, msgs))
}

// replies serves conversations.replies: the thread's parent and replies,
// oldest first, a page at a time.
func (s *Server) replies(r *http.Request) (map[string]any, string) {
	channel, thread := r.Form.Get("channel"), r.Form.Get("ts")
	if strings.HasPrefix(channel, "#") {
		return nil, "channel_not_found"
	}
	msgs := s.selectMessages(r, func(m Message) bool {
		return m.Channel == channel && (m.TS == thread || m.ThreadTS == thread)
	})
	if len(msgs) == 0 {
		return nil, "thread_not_found"
	}
	return page(r, "messages", wireAll(r, msgs))
}

// selectMessages returns, oldest first, the messages that match and lie in
// the request's oldest/latest window.
func (s *Server) selectMessages(r *http.Request, match func(Message) bool) []Message {
	oldest, _ := parseTS(r.Form.Get("oldest"))
	latest, hasLatest := parseTS(r.Form.Get("latest"))
	inclusive := isTrue(r.Form.Get("inclusive"))
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		ts, _ := parseTS(m.TS)
		if !match(m) || ts < oldest || (ts == oldest && !inclusive) {
			continue
		}
		if hasLatest && (ts > latest || (ts == latest && !inclusive)) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// wireAll renders msgs, with their metadata when the request asks for it.
func wireAll(r *http.Request, msgs []Message) []map[string]any {
	withMetadata := isTrue(r.Form.Get("include_all_metadata"))
	out := make([]map[string]any, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, wire(m, withMetadata))
	}
	return out
}

// page cuts one page out of items by the request's cursor (an offset) and
// limit, and answers it under key.
func page(r *http.Request, key string, items []map[string]any) (map[string]any, string) {
	limit := defaultPageLimit
	if l, err := strconv.Atoi(r.Form.Get("limit")); err == nil && l > 0 {
		limit = l
	}
	offset := 0
	if c := r.Form.Get("cursor"); c != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(c, "offset:"))
		if err != nil || n < 0 || n > len(items) {
			return nil, "invalid_cursor"
		}
		offset = n
	}
	end := min(offset+limit, len(items))
	body := map[string]any{key: items[offset:end], "has_more": end < len(items)}
	if end < len(items) {
		body["response_metadata"] = map[string]any{"next_cursor": "offset:" + strconv.Itoa(end)}
	}
	return body, ""
}

// wire renders a message the way the Web API does.
func wire(m Message, withMetadata bool) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if len(m.Blocks) > 0 {
		out["blocks"] = m.Blocks
	}
	if withMetadata && m.Metadata.EventType != "" {
		out["metadata"] = m.Metadata
	}
	return out
}

// parseTS turns a Slack ts ("1700000000.000100", or "1700000000") into
// microseconds.
func parseTS(ts string) (int64, bool) {
	if ts == "" {
		return 0, false
	}
	secs, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || len(frac) > 6 {
		return 0, false
	}
	us := int64(0)
	if frac != "" {
		if us, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64); err != nil {
			return 0, false
		}
	}
	return s*1_000_000 + us, true
}

func formatTS(us int64) string { return fmt.Sprintf("%d.%06d", us/1_000_000, us%1_000_000) }

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

func formatBool(b bool) string { return strconv.FormatBool(b) }

func isTrue(v string) bool { return v == "1" || v == "true" }

// authTest serves auth.test: the token was accepted (checked before), and
// the answer names the fake workspace and bot.
func (s *Server) authTest(*http.Request) (map[string]any, string) {
	return map[string]any{"url": "https://fake.slack.test/", "team": "fake", "user": "outboxd", "team_id": "T0FAKE", "user_id": "U0FAKE", "bot_id": "B0FAKE"}, ""
}
