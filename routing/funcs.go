package routing

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// truncationMark ends a string cut by truncate.
const truncationMark = "…"

// funcs are the functions templates may call besides text/template's own
// (and, or, eq, index, len, printf, ...). docs/events.md documents them.
var funcs = map[string]any{
	"json":        toJSON,
	"default":     withDefault,
	"get":         get,
	"truncate":    truncate,
	"time":        formatTime,
	"slackEscape": slackEscape,
}

// toJSON encodes v as JSON: {{json .data}} inserts an object into a JSON
// template, {{json .data.name}} a quoted, escaped string.
func toJSON(v any) (string, error) {
	b, err := marshal(v)
	if err != nil {
		return "", fmt.Errorf("json: %w", err)
	}
	return string(b), nil
}

// withDefault returns v, or def when v is empty (nil, "", or an empty list
// or object): {{.data.assignee | default "nobody"}}. A key missing from
// .data is an error before default sees it; use get for optional keys.
func withDefault(def, v any) any {
	if isEmpty(v) {
		return def
	}
	return v
}

func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return rv.Len() == 0
	}
	return false
}

// get returns m's value for key, or nil when m has none (where .m.key
// would fail): {{get .data "assignee" | default "nobody"}}.
func get(m any, key string) any {
	if obj, ok := m.(map[string]any); ok {
		return obj[key]
	}
	return nil
}

// truncate cuts s to at most n characters, the last being "…" when it had
// to cut: Slack and mail subjects have limits.
func truncate(n int, s any) string {
	str := fmt.Sprint(s)
	if utf8.RuneCountInString(str) <= n {
		return str
	}
	if n <= 0 {
		return ""
	}
	runes := []rune(str)
	return string(runes[:n-1]) + truncationMark
}

// formatTime formats t, a time (.created_at) or an RFC 3339 string, with a
// Go layout, in UTC: {{time "2006-01-02 15:04" .created_at}}.
func formatTime(layout string, t any) (string, error) {
	switch v := t.(type) {
	case time.Time:
		return v.UTC().Format(layout), nil
	case string:
		parsed, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return "", fmt.Errorf("time: %q is not an RFC 3339 time", v)
		}
		return parsed.UTC().Format(layout), nil
	}
	return "", fmt.Errorf("time: want a time or an RFC 3339 string, got %T", t)
}

// slackEscapes are the characters Slack's mrkdwn reads as markup.
var slackEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackEscape escapes &, < and > so that text from an event cannot form
// Slack links or mentions: {{slackEscape .data.title}}.
func slackEscape(s any) string {
	return slackEscapes.Replace(fmt.Sprint(s))
}
