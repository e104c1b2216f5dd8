package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/outboxd/outboxd/confschema"
)

// source is a plugins.yaml as written: its settings, keys in the case the
// user wrote them, and where in the file each key is.
//
// viper stays the loader of the settings (it applies the OUTBOX_
// overrides), but it is not handed the file: its YAML errors lose their
// line and column, and it lower-cases every key, which would turn a sink
// named Mail into mail and an Authorization header into authorization. So
// the file is parsed here, by a parser that reports positions, and viper
// gets the parsed settings; sink names and options bypass it (see
// loader.takeSinks).
type source struct {
	tree map[string]any
	// at holds the position of each key, by its path as written and by its
	// lower-cased path: viper's keys are lower case, while sink names keep
	// their case (sinks.Mail and sinks.mail are two sinks, on two lines).
	at map[string]position
}

// position is a line and column in the file, both from 1.
type position struct{ line, col int }

// parseSource parses data, in which environment references have been
// replaced by placeholders that shifts accounts for. A syntax error comes
// back with its position in the file as written.
func parseSource(data []byte, shifts columnShifts) (*source, string, position) {
	s := &source{tree: map[string]any{}, at: map[string]position{}}
	fail := func(err error) (*source, string, position) {
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			p := ye.GetToken().Position
			return nil, "not valid YAML: " + ye.GetMessage(), position{p.Line, shifts.original(p.Line, p.Column)}
		}
		return nil, fmt.Sprintf("not valid YAML: %v", err), position{}
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return fail(err)
	}
	var body ast.Node
	for _, doc := range file.Docs {
		if doc.Body == nil {
			continue
		}
		if body != nil {
			return nil, "holds more than one YAML document", s.positionOf(doc.Body, shifts)
		}
		body = doc.Body
	}
	if body == nil {
		return s, "", position{}
	}
	var v any
	if err := yaml.NodeToValue(body, &v); err != nil {
		return fail(err)
	}
	tree, ok := v.(map[string]any)
	if !ok {
		return nil, "want a mapping of keys (database:, relay:, sinks:, ...)", s.positionOf(body, shifts)
	}
	s.tree = tree
	s.index("", body, shifts)
	return s, "", position{}
}

func (s *source) positionOf(n ast.Node, shifts columnShifts) position {
	p := n.GetToken().Position
	return position{p.Line, shifts.original(p.Line, p.Column)}
}

// index records the position of every key below n, whose path is prefix.
func (s *source) index(prefix string, n ast.Node, shifts columnShifts) {
	switch n := n.(type) {
	case *ast.MappingNode:
		for _, mv := range n.Values {
			s.index(prefix, mv, shifts)
		}
	case *ast.MappingValueNode:
		if _, merge := n.Key.(*ast.MergeKeyNode); merge {
			return
		}
		key := confschema.Join(prefix, n.Key.GetToken().Value)
		s.at[key] = s.positionOf(n.Key, shifts)
		if lower := strings.ToLower(key); lower != key {
			if _, taken := s.at[lower]; !taken {
				s.at[lower] = s.at[key]
			}
		}
		s.index(key, n.Value, shifts)
	case *ast.SequenceNode:
		for i, item := range n.Values {
			key := fmt.Sprintf("%s[%d]", prefix, i)
			s.at[key] = s.positionOf(item, shifts)
			s.index(key, item, shifts)
		}
	case *ast.AnchorNode:
		s.index(prefix, n.Value, shifts)
	case *ast.TagNode:
		s.index(prefix, n.Value, shifts)
	}
}

// find returns the position of key, or of its nearest ancestor the file
// has (a problem with a default value points at the block that lacks it).
func (s *source) find(key string) (position, bool) {
	for key != "" {
		if p, ok := s.at[key]; ok {
			return p, true
		}
		if p, ok := s.at[strings.ToLower(key)]; ok {
			return p, true
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return position{}, false
}
