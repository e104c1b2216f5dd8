package slack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Slack notifies people for the mentions in a message: <!channel>, <!here>
// and <!everyone> (everyone in the channel or workspace), <!subteam^ID> (a
// user group) and <@U0123> (a user) in text and mrkdwn text objects, the
// broadcast, usergroup and user elements of rich_text blocks, and, when a
// post asks for link_names, plain @channel, @here and @everyone. With the
// escape_mentions option every one of them is shown as text instead.

// specialEscaper writes the '<' of Slack's <!...> and <@...> sequences as
// the entity Slack shows as a literal '<' (date tokens, <!date^...>, are
// shown as text too).
var specialEscaper = strings.NewReplacer("<!", "&lt;!", "<@", "&lt;@")

// plainMention matches the plain-text broadcast mentions; a word joiner
// after the '@' keeps them from being linked, and shows nothing.
var plainMention = regexp.MustCompile(`(?i)@(channel|here|everyone)\b`)

// escapeMentions returns text with every mention shown as text.
func escapeMentions(text string) string {
	return plainMention.ReplaceAllString(specialEscaper.Replace(text), "@\u2060$1")
}

// mentionElements are the rich_text element types that notify, with the
// field naming whom.
var mentionElements = map[string]string{"broadcast": "range", "user": "user_id", "usergroup": "usergroup_id"}

// escapeBlockMentions returns the Block Kit array blocks with the text of
// mrkdwn text objects escaped and rich_text mention elements turned into
// text elements showing the mention.
func escapeBlockMentions(blocks json.RawMessage) (json.RawMessage, error) {
	var tree any
	if err := json.Unmarshal(blocks, &tree); err != nil {
		return nil, err
	}
	out, err := json.Marshal(escapeTree(tree))
	if err != nil {
		return nil, fmt.Errorf("escaping mentions: %w", err)
	}
	return out, nil
}

func escapeTree(node any) any {
	switch n := node.(type) {
	case []any:
		for i, child := range n {
			n[i] = escapeTree(child)
		}
	case map[string]any:
		kind, _ := n["type"].(string)
		if field, ok := mentionElements[kind]; ok {
			whom, _ := n[field].(string)
			return map[string]any{"type": "text", "text": "@\u2060" + whom}
		}
		for key, child := range n {
			if text, isString := child.(string); isString && key == "text" && kind == "mrkdwn" {
				n[key] = escapeMentions(text)
				continue
			}
			n[key] = escapeTree(child)
		}
	}
	return node
}
