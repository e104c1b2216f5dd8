package relay

import (
	"fmt"
	"maps"
	"slices"

	"github.com/outboxd/outboxd/core/sink"
)

// DefaultDigestMaxMessages bounds a digest's members when its policy sets
// no MaxMessages: Slack shows about 50 lines of a message before "show
// more", and a digest is meant to be read at a glance.
const DefaultDigestMaxMessages = 50

// digests reports whether the sink groups any of its rows into digests.
func (c SinkConfig) digests() bool { return c.Digest != nil || len(c.RouteDigests) > 0 }

// digestPolicy is the policy the rows of route follow, nil for none.
func (c SinkConfig) digestPolicy(route string) *sink.DigestPolicy {
	if p, ok := c.RouteDigests[route]; ok && route != "" {
		return p
	}
	return c.Digest
}

// digestProblems completes the digest policies' defaults, in place (they
// are the sink config's own pointers, set by whoever built it), and
// returns one *FieldError per field out of range.
func (c SinkConfig) digestProblems() []error {
	if !c.digests() {
		return nil
	}
	var errs []error
	if _, ok := c.Sink.(sink.DigestSink); !ok && c.Sink != nil {
		errs = append(errs, &FieldError{Sink: c.Name, Field: "Digest",
			Err: fmt.Errorf("needs a sink that delivers digests (a sink.DigestSink); this one does not")})
	}
	check := func(field string, p *sink.DigestPolicy) {
		setDefault(&p.MaxMessages, DefaultDigestMaxMessages)
		if p.Window < 0 {
			errs = append(errs, &FieldError{Sink: c.Name, Field: field + ".Window", Err: fmt.Errorf("must not be negative, got %s", p.Window)})
		}
		if p.MaxMessages < 0 {
			errs = append(errs, &FieldError{Sink: c.Name, Field: field + ".MaxMessages", Err: fmt.Errorf("must not be negative, got %d", p.MaxMessages)})
		}
	}
	if c.Digest != nil {
		check("Digest", c.Digest)
	}
	for _, route := range slices.Sorted(maps.Keys(c.RouteDigests)) {
		check("RouteDigests["+route+"]", c.RouteDigests[route])
	}
	return errs
}
