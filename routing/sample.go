package routing

import (
	"encoding/json"
	"text/template/parse"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// Values of a generated sample event.
const (
	sampleKey = "sample"
	// sampleLeaf is every field a template reads from .data: a time in
	// RFC 3339, so that it reads as a string and as a time alike.
	sampleLeaf = "2006-01-02T15:04:05Z"
)

// sampleCreatedAt is a generated sample's .created_at.
var sampleCreatedAt = time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)

// generatedSample is an event matching patterns whose data holds every
// .data path the templates read outside range and with blocks (where the
// dot is no longer the event); a template that needs more declares a
// sample beside its route.
func generatedSample(patterns []string, templates []*compiled, threadKeys [][]threadPart) sink.Event {
	data := map[string]any{}
	for _, c := range templates {
		for _, f := range c.fields {
			walkFields(f.tree.Root, true, func(path []string) { setPath(data, path) })
		}
	}
	for _, parts := range threadKeys {
		for _, p := range parts {
			if len(p.Data) > 0 {
				setPath(data, p.Data)
			}
		}
	}
	raw, _ := json.Marshal(data) // strings and maps only
	return sink.Event{Type: sampleType(patterns), Key: sampleKey, Data: raw, CreatedAt: sampleCreatedAt}
}

// setPath sets data[path[0]][path[1]]... to sampleLeaf, turning a leaf
// set before into an object when a longer path goes through it.
func setPath(data map[string]any, path []string) {
	m := data
	for i, name := range path {
		if i == len(path)-1 {
			if _, set := m[name]; !set {
				m[name] = sampleLeaf
			}
			return
		}
		next, ok := m[name].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[name] = next
		}
		m = next
	}
}

// walkFields calls found with the path below .data of every field the
// node reads from the event: .data.a.b, and $.data.a.b anywhere. dotIsEvent
// is false inside range and with, where .x is relative to something else.
func walkFields(node parse.Node, dotIsEvent bool, found func(path []string)) {
	visitData := func(ident []string) {
		if len(ident) > 1 && ident[0] == "data" {
			found(ident[1:])
		}
	}
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkFields(c, dotIsEvent, found)
		}
	case *parse.ActionNode:
		walkFields(n.Pipe, dotIsEvent, found)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkFields(c, dotIsEvent, found)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkFields(a, dotIsEvent, found)
		}
	case *parse.FieldNode:
		if dotIsEvent {
			visitData(n.Ident)
		}
	case *parse.VariableNode:
		if len(n.Ident) > 0 && n.Ident[0] == "$" {
			visitData(n.Ident[1:])
		}
	case *parse.ChainNode:
		walkFields(n.Node, dotIsEvent, found)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, dotIsEvent, dotIsEvent, found)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, dotIsEvent, false, found)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, dotIsEvent, false, found)
	case *parse.TemplateNode:
		walkFields(n.Pipe, dotIsEvent, found)
	}
}

// walkBranch walks an if, range or with: its pipeline with the outer dot,
// its body with bodyDotIsEvent, its else with the outer dot.
func walkBranch(b *parse.BranchNode, dotIsEvent, bodyDotIsEvent bool, found func([]string)) {
	walkFields(b.Pipe, dotIsEvent, found)
	walkFields(b.List, bodyDotIsEvent, found)
	walkFields(b.ElseList, dotIsEvent, found)
}
