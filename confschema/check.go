package confschema

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Unknown reports every key of tree that decl (a struct, or a pointer to
// one) does not declare, each with the nearest declared key as a
// suggestion when one is close, sorted by key. A mapping given for an
// undeclared key is reported key by key (relais.lease, not relais).
// Values of the wrong shape are left to Decode.
func Unknown(tree map[string]any, decl any) []Problem {
	t := structType(decl)
	known := declaredKeys("", t, tree, true)
	var problems []Problem
	unknownIn("", t, tree, known, &problems)
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	return problems
}

func unknownIn(prefix string, t reflect.Type, tree map[string]any, known []string, problems *[]Problem) {
	fields := fieldsOf(t)
	anyKey := takesAnyKey(fields)
	for _, k := range slices.Sorted(maps.Keys(tree)) {
		key := Join(prefix, k)
		f, ok := lookup(fields, k)
		if !ok {
			if anyKey {
				continue
			}
			for _, leaf := range leaves(key, tree[k]) {
				*problems = append(*problems, Problem{Key: leaf, Unknown: true, Suggestion: Nearest(leaf, known)})
			}
			continue
		}
		eachMapping(key, f.sf.Type, tree[k], func(key string, elem reflect.Type, m map[string]any) {
			unknownIn(key, elem, m, known, problems)
		})
	}
}

// eachMapping calls visit for every mapping of declared keys that v, the
// value of a key of type t, holds: v itself for a struct, each entry for a
// map of structs, each item for a list of them; with the key path of each.
// Values of another shape than declared are skipped (Decode reports them).
func eachMapping(key string, t reflect.Type, v any, visit func(key string, elem reflect.Type, m map[string]any)) {
	sh, elem := shapeOf(t)
	switch sh {
	case shapeMapping:
		if m, ok := v.(map[string]any); ok {
			visit(key, elem, m)
		}
	case shapeEntries:
		if m, ok := v.(map[string]any); ok {
			for _, name := range slices.Sorted(maps.Keys(m)) {
				if entry, ok := m[name].(map[string]any); ok {
					visit(key+"."+name, elem, entry)
				}
			}
		}
	case shapeItems:
		if list, ok := v.([]any); ok {
			for i, item := range list {
				if m, ok := item.(map[string]any); ok {
					visit(fmt.Sprintf("%s[%d]", key, i), elem, m)
				}
			}
		}
	}
}

// leaves returns the key paths of the values below key: key itself for a
// value or an empty mapping.
func leaves(key string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{key}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, leaves(key+"."+k, m[k])...)
	}
	return out
}

// ValueKeys returns the declared keys that hold a value (not a mapping)
// as they apply to tree: below each entry tree has for a map of structs,
// below each item it has for a list. Mappings whose keys the user chooses
// (a sink's options, headers) are not among them. Environment overrides
// are looked up for these keys.
func ValueKeys(tree map[string]any, decl any) []string {
	return declaredKeys("", structType(decl), tree, false)
}

// declaredKeys lists the keys t declares below prefix, instantiated for
// tree; withFree adds the keys of free-form mappings (for suggestions).
func declaredKeys(prefix string, t reflect.Type, tree map[string]any, withFree bool) []string {
	var out []string
	for _, f := range fieldsOf(t) {
		if f.remain {
			continue
		}
		key := Join(prefix, f.name)
		sh, elem := shapeOf(f.sf.Type)
		switch sh {
		case shapeValue:
			out = append(out, key)
		case shapeFreeMapping:
			if withFree {
				out = append(out, key)
			}
		case shapeMapping:
			sub, _ := valueOf(tree, f.name).(map[string]any)
			out = append(out, declaredKeys(key, elem, sub, withFree)...)
		default:
			eachMapping(key, f.sf.Type, valueOf(tree, f.name), func(key string, elem reflect.Type, m map[string]any) {
				out = append(out, declaredKeys(key, elem, m, withFree)...)
			})
		}
	}
	return out
}

// valueOf returns tree's value for key, matched case-insensitively.
func valueOf(tree map[string]any, key string) any {
	if v, ok := tree[key]; ok {
		return v
	}
	for k, v := range tree {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

// Nearest returns the candidate closest to key by edit distance, or ""
// when none is reasonably close, so that a typo gets a suggestion and
// nonsense does not.
func Nearest(key string, candidates []string) string {
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
