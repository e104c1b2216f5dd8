package routing

import (
	"fmt"
	"text/template"
	"text/template/parse"
)

// threadPart is one piece of a thread_key or tenant template as publish()'s
// event_thread_key() and event_tenant() evaluate it (migrations 003 and
// 016): literal text, the event's type or key, or a path into its data.
type threadPart struct {
	Text  *string  `json:"text,omitempty"`
	Field string   `json:"field,omitempty"`
	Data  []string `json:"data,omitempty"`
}

// keyTemplateError says what a template the database evaluates
// (thread_key, tenant) may hold.
func keyTemplateError(name string) error {
	return fmt.Errorf("a %s template may hold only text, {{.type}}, {{.key}} and {{.data.path}}: the database evaluates it when the event is published", name)
}

// parseThreadKey turns a thread_key template into parts.
func parseThreadKey(text string) ([]threadPart, error) { return parseKeyTemplate(FieldThreadKey, text) }

// parseKeyTemplate turns a template the database evaluates, called name
// (thread_key, tenant), into parts.
func parseKeyTemplate(name, text string) ([]threadPart, error) {
	errThreadKeyTemplate := keyTemplateError(name)
	t, err := template.New(name).Parse(text)
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
		return nil, fmt.Errorf("the %s template is empty", name)
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
