package relay

import "github.com/outboxd/outboxd/core/sink"

// durableSinks returns those of sinks whose claims commit durably
// (claim.sql's @durable_sinks): the sinks that look for an Uncertain
// attempt's effect before sending again (sink.UncertainChecker, Slack).
// Only for them does a claim forgotten by a PostgreSQL crash matter: the
// row would come back as a first attempt, not Uncertain, and the check
// would not run. Every other claim commits without waiting for the WAL
// flush, which was most of a message's latency from its commit to its
// delivery (docs/performance.md, "Where the latency went"). It is nil when
// no sink of the list checks, as for every sink of most relays.
func (r *Relay) durableSinks(sinks []string) []string {
	var out []string
	for _, name := range sinks {
		if c, ok := r.sinks[name].Sink.(sink.UncertainChecker); ok && c.ChecksUncertain() {
			out = append(out, name)
		}
	}
	return out
}
