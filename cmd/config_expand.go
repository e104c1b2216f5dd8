package cmd

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
// and returns the references in placeholder order.
func hideRefs(data []byte) ([]byte, []string) {
	var refs []string
	out := envReference.ReplaceAllFunc(data, func(ref []byte) []byte {
		refs = append(refs, string(ref))
		return fmt.Appendf(nil, "__outboxd_ref_%d__", len(refs)-1)
	})
	return out, refs
}

// expander replaces the placeholders in configuration values with the
// expansion of their references, and remembers every variable that is
// referenced but not set.
type expander struct {
	env     LookupEnv
	refs    []string
	missing []string
}

// expandMap returns a copy of m with references in its string values (and
// in strings inside lists) expanded. prefix is m's key path, for messages.
func (e *expander) expandMap(prefix string, m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = e.expandValue(joinKey(prefix, k), m[k])
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
	e.missing = append(e.missing, fmt.Sprintf(
		"%s: environment variable %s is not set (write ${%s:-default} to make it optional)", key, name, name))
	return ""
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// nearest returns the candidate closest to key by edit distance, or "" when
// none is reasonably close, so a typo gets a suggestion and nonsense does not.
func nearest(key string, candidates []string) string {
	best, bestDist := "", len(key)/2+2
	for _, c := range candidates {
		if d := levenshtein(key, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b (insertions, deletions
// and substitutions of bytes; keys are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isSecretKey reports whether a key's value is a credential, to be kept out
// of every output.
func isSecretKey(key string) bool {
	last := strings.ToLower(key[strings.LastIndex(key, ".")+1:])
	for _, word := range []string{"token", "password", "secret", "api_key", "webhook_url"} {
		if strings.Contains(last, word) {
			return true
		}
	}
	return false
}
