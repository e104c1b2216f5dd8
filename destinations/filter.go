package destinations

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Bounds of a destination's payload filter. A filter is matched inside
// every producer's transaction that publishes for its tenant, so what a
// tenant writes must cost the producer a bounded amount of work: the
// database compiles a stored filter into a SQL/JSON path predicate whose
// work grows with its terms times their fields' segments, and compiles
// one over these bounds into a predicate that matches nothing
// (event_filter_jsonpath(), migration 030). event_filter_bounds()
// declares the same figures in SQL; TestFilterBoundsAgreeWithSQL holds
// the two together.
const (
	// MaxFilterBytes bounds a filter's compact JSON: a few dozen
	// conditions on short field names and values.
	MaxFilterBytes = 4096
	// MaxFilterDepth bounds how deep $and, $or and $not nest (the
	// filter itself is depth 1).
	MaxFilterDepth = 4
	// MaxFilterTerms bounds a filter's comparisons, each value of an
	// $in or $nin list counting one.
	MaxFilterTerms = 64
	// MaxFilterSegments bounds a field's dotted segments ("data.a.b"
	// has three), as MaxPatternSegments bounds an event type's.
	MaxFilterSegments = 16
)

// Filter operators, as a filter spells them.
const (
	opAnd    = "$and"
	opOr     = "$or"
	opNot    = "$not"
	opIn     = "$in"
	opNin    = "$nin"
	opGt     = "$gt"
	opGte    = "$gte"
	opLt     = "$lt"
	opLte    = "$lte"
	opExists = "$exists"
	opPrefix = "$prefix"
)

// filterFieldHint says which fields a filter may name, for errors.
const filterFieldHint = `a field is "type", "data" or a dotted path into data such as "data.amount"`

// CheckFilter checks a destination's payload filter and returns it
// compacted, or nil when it is absent, null or {} (no filter: every
// event of the subscribed types). A filter is a JSON object whose keys
// are fields ("type", "data", "data.<name>[.<name>...]") or $and, $or
// (arrays of filters) and $not (a filter); a field's value is a string,
// number, boolean or null it must equal, or an object of operators that
// must all hold: $in and $nin (lists of such values), $gt, $gte, $lt,
// $lte (a number or a string), $exists (a boolean), $prefix (a string).
// All of an object's keys must hold. The error names the path of what it
// refuses, as in "filter.$and[1].data.amount.$gt: ...".
func CheckFilter(doc json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(doc)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, trimmed); err != nil {
		return nil, inputErrorf("filter must be a JSON object: %v", err)
	}
	if compact.Len() > MaxFilterBytes {
		return nil, inputErrorf("filter is %d bytes, over the limit of %d", compact.Len(), MaxFilterBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, inputErrorf("filter must be a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, inputErrorf("filter must be one JSON object")
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		return nil, inputErrorf("filter must be a JSON object, got %s", jsonKind(tree))
	}
	if len(obj) == 0 {
		return nil, nil
	}
	c := filterChecker{}
	if err := c.filter("filter", obj, 1); err != nil {
		return nil, err
	}
	// Written again from what was decoded: an escape PostgreSQL's jsonb
	// refuses (a lone surrogate, which Go reads as U+FFFD) is not stored,
	// so a filter accepted here is always one the database takes.
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, inputErrorf("filter: %v", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// filterChecker walks a decoded filter, counting its terms.
type filterChecker struct{ terms int }

// filter checks an object of clauses at path, nested depth deep.
func (c *filterChecker) filter(path string, obj map[string]any, depth int) error {
	if depth > MaxFilterDepth {
		return inputErrorf("%s: $and, $or and $not nest %d deep, over the limit of %d", path, depth, MaxFilterDepth)
	}
	if len(obj) == 0 {
		return inputErrorf("%s: an empty filter here matches nothing useful; give at least one condition", path)
	}
	for _, key := range sortedKeys(obj) {
		at, v := path+"."+key, obj[key]
		if strings.ContainsRune(key, 0) {
			return inputErrorf("%s: a key holds a NUL character (\\u0000)", path)
		}
		var err error
		switch {
		case key == opAnd || key == opOr:
			err = c.list(at, v, depth)
		case key == opNot:
			sub, ok := v.(map[string]any)
			if !ok {
				return inputErrorf("%s: must be a filter (a JSON object), got %s", at, jsonKind(v))
			}
			err = c.filter(at, sub, depth+1)
		case strings.HasPrefix(key, "$"):
			return inputErrorf("%s: unknown operator; at this level a filter takes fields, $and, $or and $not", at)
		default:
			err = c.field(at, key, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// list checks the filters of $and or $or at path.
func (c *filterChecker) list(path string, v any, depth int) error {
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		return inputErrorf("%s: must be a non-empty list of filters, got %s", path, jsonKind(v))
	}
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", path, i)
		sub, ok := item.(map[string]any)
		if !ok {
			return inputErrorf("%s: must be a filter (a JSON object), got %s", at, jsonKind(item))
		}
		if err := c.filter(at, sub, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// field checks the condition on field (its key in the filter) at path.
func (c *filterChecker) field(path, field string, v any) error {
	segs := strings.Split(field, ".")
	switch {
	case len(segs) > MaxFilterSegments:
		return inputErrorf("%s: the field has %d segments, over the limit of %d", path, len(segs), MaxFilterSegments)
	case segs[0] != "data" && !(segs[0] == "type" && len(segs) == 1), slices.Contains(segs, ""):
		return inputErrorf("%s: unknown field; %s", path, filterFieldHint)
	}
	ops, ok := v.(map[string]any)
	if !ok {
		if err := checkScalar(path, v); err != nil {
			return err
		}
		return c.count(path, 1)
	}
	if len(ops) == 0 {
		return inputErrorf("%s: give at least one operator ($in, $nin, $gt, $gte, $lt, $lte, $exists, $prefix)", path)
	}
	for _, op := range sortedKeys(ops) {
		at, arg := path+"."+op, ops[op]
		n := 1
		switch op {
		case opIn, opNin:
			items, ok := arg.([]any)
			if !ok || len(items) == 0 {
				return inputErrorf("%s: must be a non-empty list of values, got %s", at, jsonKind(arg))
			}
			for i, item := range items {
				if err := checkScalar(fmt.Sprintf("%s[%d]", at, i), item); err != nil {
					return err
				}
			}
			n = len(items)
		case opGt, opGte, opLt, opLte:
			switch a := arg.(type) {
			case string:
				if err := checkText(at, a); err != nil {
					return err
				}
			case json.Number:
				if err := checkNumber(at, a); err != nil {
					return err
				}
			default:
				return inputErrorf("%s: must be a number or a string, got %s", at, jsonKind(arg))
			}
		case opExists:
			if _, ok := arg.(bool); !ok {
				return inputErrorf("%s: must be true or false, got %s", at, jsonKind(arg))
			}
		case opPrefix:
			prefix, ok := arg.(string)
			if !ok {
				return inputErrorf("%s: must be a string, got %s", at, jsonKind(arg))
			}
			if err := checkText(at, prefix); err != nil {
				return err
			}
		default:
			return inputErrorf("%s: unknown operator; a field takes $in, $nin, $gt, $gte, $lt, $lte, $exists and $prefix (or a value to equal)", at)
		}
		if err := c.count(at, n); err != nil {
			return err
		}
	}
	return nil
}

// count adds n terms, refusing the filter at path past MaxFilterTerms.
func (c *filterChecker) count(path string, n int) error {
	c.terms += n
	if c.terms > MaxFilterTerms {
		return inputErrorf("%s: the filter has more than %d comparisons (each value of $in and $nin counts one)", path, MaxFilterTerms)
	}
	return nil
}

// checkScalar checks a value a field is compared with for equality.
func checkScalar(path string, v any) error {
	switch a := v.(type) {
	case string:
		return checkText(path, a)
	case bool, nil:
		return nil
	case json.Number:
		return checkNumber(path, a)
	default:
		return inputErrorf("%s: must be a string, a number, a boolean or null, got %s (to match one of several values, use $in)", path, jsonKind(v))
	}
}

// checkText refuses a NUL character, which no PostgreSQL text or jsonb
// string holds.
func checkText(path, s string) error {
	if strings.ContainsRune(s, 0) {
		return inputErrorf("%s: holds a NUL character (\\u0000)", path)
	}
	return nil
}

// checkNumber refuses numbers no event's data would hold as one (past a
// float64), which the database would otherwise spell with hundreds of
// digits.
func checkNumber(path string, n json.Number) error {
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return inputErrorf("%s: %s is out of range", path, n)
	}
	return nil
}

// jsonKind names a decoded JSON value's kind, for errors.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// sortedKeys are obj's keys in order, so that errors name the same path
// whatever order the keys came in.
func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
