package routing

import (
	"errors"
	"text/template"
	"text/template/parse"
)

// threadPart is one piece of a thread_key template as publish()'s
// event_thread_key() evaluates it (migration 003): literal text, the
// event's type or key, or a path into its data.
type threadPart struct {
	Text  *string  `json:"text,omitempty"`
	Field string   `json:"field,omitempty"`
	Data  []string `json:"data,omitempty"`
}

// errThreadKeyTemplate says what a thread_key template may hold.
var errThreadKeyTemplate = errors.New("a thread_key template may hold only text, {{.type}}, {{.key}} and {{.data.path}}: the database evaluates it when the event is published")

// parseThreadKey turns a thread_key template into parts.
func parseThreadKey(text string) ([]threadPart, error) {
	t, err := template.New(FieldThreadKey).Parse(text)
	if err != nil {
		return nil, err
	}
	var parts []threadPart
	for _, node := range t.Tree.Root.Nodes {
		switch n := node.(type) {
		case *parse.TextNode:
			s := string(n.Text)
			parts = append(parts, threadPart{Text: &s})
		case *parse.ActionNode:
			part, ok := threadField(n)
			if !ok {
				return nil, errThreadKeyTemplate
			}
			parts = append(parts, part)
		default:
			return nil, errThreadKeyTemplate
		}
	}
	if len(parts) == 0 {
		return nil, errors.New("the thread_key template is empty")
	}
	return parts, nil
}

// threadField reads {{.type}}, {{.key}} or {{.data.path}}.
func threadField(n *parse.ActionNode) (threadPart, bool) {
	if len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
		return threadPart{}, false
	}
	f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
	if !ok {
		return threadPart{}, false
	}
	switch {
	case len(f.Ident) == 1 && (f.Ident[0] == "type" || f.Ident[0] == "key"):
		return threadPart{Field: f.Ident[0]}, true
	case len(f.Ident) > 1 && f.Ident[0] == "data":
		return threadPart{Data: f.Ident[1:]}, true
	}
	return threadPart{}, false
}
