package destinations

import (
	"fmt"
	"strings"

	"github.com/outboxd/outboxd/routing"
)

// Bounds of one subscribed event pattern. A pattern is matched inside
// every producer's transaction that publishes for its tenant, so what a
// tenant writes must not cost the producer more than a bounded, linear
// amount of work: event_patterns_match() (migration 027) is a segment
// matcher whose work grows with the pattern's segments times the event
// type's, and it refuses (matches nothing) a stored pattern over these
// bounds. event_pattern_bounds() declares the same figures in SQL;
// TestPatternBoundsAgreeWithSQL holds the two together.
const (
	// MaxPatternBytes bounds one pattern: event types are short dotted
	// names, and 256 bytes hold sixteen segments of fifteen characters.
	MaxPatternBytes = 256
	// MaxPatternSegments bounds one pattern's dotted segments (its "**"
	// included): deeper hierarchies than this are not event types anyone
	// names.
	MaxPatternSegments = 16
)

// CheckPattern reports whether pattern can be subscribed to: an event
// pattern as routes take it (dotted segments of letters, digits, "_" and
// "-", "*" for one segment, "**" for any number), at most MaxPatternBytes
// long and MaxPatternSegments deep. Its error names neither the
// destination nor its field: the caller does.
func CheckPattern(pattern string) error {
	if len(pattern) > MaxPatternBytes {
		return fmt.Errorf("pattern is %d bytes, over the limit of %d", len(pattern), MaxPatternBytes)
	}
	if n := strings.Count(pattern, ".") + 1; n > MaxPatternSegments {
		return fmt.Errorf("pattern has %d segments, over the limit of %d", n, MaxPatternSegments)
	}
	// The segments' syntax is routing's, declared once there; the
	// regular expression it makes is not used (the database matches
	// segments, not regular expressions).
	if _, err := routing.PatternRegexps([]string{pattern}); err != nil {
		return err
	}
	return nil
}

// checkPatterns checks each of a destination's event patterns, naming the
// field and the index of the first refused.
func checkPatterns(patterns []string) error {
	if len(patterns) > MaxEvents {
		return inputErrorf("events lists %d patterns, over the limit of %d", len(patterns), MaxEvents)
	}
	for i, p := range patterns {
		if err := CheckPattern(p); err != nil {
			return inputErrorf("events[%d]: %v", i, err)
		}
	}
	return nil
}
