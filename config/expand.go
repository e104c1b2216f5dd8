package config

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/outboxd/outboxd/confschema"
)

// envReference matches ${VAR}, ${VAR:-default} and the escape $${, which
// stands for a literal ${.
var envReference = regexp.MustCompile(`\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// refPlaceholder stands in for one environment reference while the YAML
// is parsed. References are swapped out of the raw text first because
// "${" is not valid inside a YAML flow mapping ({token: ${TOKEN}}), and
// expanding into the raw text instead would let a value's quotes, commas or
// "#" change the document's structure.
var refPlaceholder = regexp.MustCompile(`__outboxd_ref_([0-9]+)__`)

// hideRefs replaces each environment reference in data with a placeholder
// and returns the references in placeholder order, and where the
// placeholders moved the text (to report positions in the file as written).
func hideRefs(data []byte) ([]byte, []string, columnShifts) {
	var (
		refs   []string
		shifts columnShifts
		out    []byte
		last   int
	)
	for _, m := range envReference.FindAllIndex(data, -1) {
		ref := string(data[m[0]:m[1]])
		ph := fmt.Sprintf("__outboxd_ref_%d__", len(refs))
		refs = append(refs, ref)
		out = append(out, data[last:m[0]]...)
		line := 1 + bytes.Count(data[:m[0]], []byte("\n"))
		col := len(out) - bytes.LastIndexByte(out, '\n') // 1-based column of the placeholder in out
		shifts = append(shifts, columnShift{line: line, col: col + len(ph), delta: len(ph) - len(ref)})
		out = append(out, ph...)
		last = m[1]
	}
	return append(out, data[last:]...), refs, shifts
}

// columnShift records that, on line, text from column col on (in the text
// with placeholders) stands delta columns to the right of where the file
// has it.
type columnShift struct{ line, col, delta int }

type columnShifts []columnShift

// original maps a column of the text with placeholders back to the file's.
func (s columnShifts) original(line, col int) int {
	orig := col
	for _, sh := range s {
		if sh.line == line && sh.col <= col {
			orig -= sh.delta
		}
	}
	return orig
}

// expander replaces the placeholders in configuration values with the
// expansion of their references, and remembers every variable that is
// referenced but not set.
type expander struct {
	env     LookupEnv
	refs    []string
	missing []confschema.Problem
}

// expandMap returns a copy of m with references in its string values (and
// in strings inside lists) expanded. prefix is m's key path, for messages.
func (e *expander) expandMap(prefix string, m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = e.expandValue(confschema.Join(prefix, k), m[k])
	}
	return out
}

func (e *expander) expandValue(key string, v any) any {
	switch v := v.(type) {
	case string:
		return e.expandString(key, v)
	case map[string]any:
		return e.expandMap(key, v)
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = e.expandValue(fmt.Sprintf("%s[%d]", key, i), item)
		}
		return out
	default:
		return v
	}
}

func (e *expander) expandString(key, s string) string {
	return refPlaceholder.ReplaceAllStringFunc(s, func(ph string) string {
		i, err := strconv.Atoi(refPlaceholder.FindStringSubmatch(ph)[1])
		if err != nil || i >= len(e.refs) {
			return ph // not one of ours: text that merely looks like a placeholder
		}
		return e.expandRef(key, e.refs[i])
	})
}

// expandRef expands one reference: ${VAR}, ${VAR:-default} or $${.
func (e *expander) expandRef(key, ref string) string {
	if ref == "$${" {
		return "${"
	}
	m := envReference.FindStringSubmatch(ref)
	name, hasDefault, def := m[1], m[2] != "", m[3]
	val, ok := e.env(name)
	switch {
	case ok && (val != "" || !hasDefault):
		return val
	case hasDefault:
		return def
	}
	e.missing = append(e.missing, confschema.Problem{Key: key, Message: fmt.Sprintf(
		"environment variable %s is not set (write ${%s:-default} to make it optional)", name, name)})
	return ""
}
