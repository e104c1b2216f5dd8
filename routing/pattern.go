package routing

import (
	"fmt"
	"regexp"
	"strings"
)

// An event type is dotted segments of letters, digits, "_" and "-"
// ("order.created"); publish() checks the same.
var segmentPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Pattern wildcards: one dotted segment, and any number of them.
const (
	wildcardOne = "*"
	wildcardAny = "**"
)

// patternRegexp turns an event pattern into the regular expression that
// publish() matches against "." + type, in PostgreSQL and in Go alike:
// each segment reads a leading dot, so "**" can stand for no segment at
// all. "order.*" -> ^\.order\.[^.]+$, "order.**" -> ^\.order(\.[^.]+)*$
// (order itself included), "**" -> every type.
func patternRegexp(pattern string) (string, error) {
	if pattern == "" {
		return "", fmt.Errorf("empty event pattern")
	}
	var b strings.Builder
	b.WriteString("^")
	for _, seg := range strings.Split(pattern, ".") {
		switch {
		case seg == wildcardOne:
			b.WriteString(`\.[^.]+`)
		case seg == wildcardAny:
			b.WriteString(`(\.[^.]+)*`)
		case segmentPattern.MatchString(seg):
			b.WriteString(`\.` + regexp.QuoteMeta(seg))
		default:
			return "", fmt.Errorf("event pattern %q: segment %q is not letters, digits, \"_\" and \"-\", nor * or **", pattern, seg)
		}
	}
	b.WriteString("$")
	return b.String(), nil
}

// checkEventType reports whether typ is a valid event type.
func checkEventType(typ string) error {
	for _, seg := range strings.Split(typ, ".") {
		if !segmentPattern.MatchString(seg) {
			return fmt.Errorf("event type %q is not dotted segments of letters, digits, \"_\" and \"-\"", typ)
		}
	}
	return nil
}

// matcher matches event types against a route's patterns.
type matcher struct {
	regexps  []string // for publish(), in the route's order
	compiled []*regexp.Regexp
}

func newMatcher(patterns []string) (*matcher, error) {
	m := &matcher{}
	for _, p := range patterns {
		re, err := patternRegexp(p)
		if err != nil {
			return nil, err
		}
		m.regexps = append(m.regexps, re)
		m.compiled = append(m.compiled, regexp.MustCompile(re))
	}
	return m, nil
}

// Match reports whether typ matches one of the patterns.
func (m *matcher) Match(typ string) bool {
	for _, re := range m.compiled {
		if re.MatchString("." + typ) {
			return true
		}
	}
	return false
}

// sampleType is an event type that patterns' first pattern matches, for a
// generated sample event: each wildcard becomes "sample".
func sampleType(patterns []string) string {
	segs := strings.Split(patterns[0], ".")
	for i, s := range segs {
		if s == wildcardOne || s == wildcardAny {
			segs[i] = "sample"
		}
	}
	return strings.Join(segs, ".")
}

// PatternRegexps turns event patterns (order.*, **) into the anchored
// regular expressions publish() matches against "." + type, for tables
// other than routes that subscribe to event types the way routes do (a
// destination's events, migration 016). Its error names the bad pattern.
func PatternRegexps(patterns []string) ([]string, error) {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		re, err := patternRegexp(p)
		if err != nil {
			return nil, err
		}
		out[i] = re
	}
	return out, nil
}
