package relay

import (
	"cmp"
	"slices"
)

// claimOrder orders the sinks of a claim loop for its next claim.
// claim.sql shares a claim's rows among its sinks in list order, each sink
// taking at most an even share of what the sinks before it left: listing
// first the sinks that had the fewest rows in the last claim lets the
// quiet sinks take what they have and leaves the rest to the busy ones, so
// a single busy sink among idle ones still gets (almost) the whole claim
// and busy sinks split it evenly, without locking rows the claim would
// not return.
type claimOrder struct {
	last map[string]int // rows each sink got in the last claim
}

func newClaimOrder() *claimOrder { return &claimOrder{last: map[string]int{}} }

// sorted returns sinks, the fewest rows in the last claim first; sinks
// with as many keep their order. sinks itself is left as it is.
func (o *claimOrder) sorted(sinks []string) []string {
	s := slices.Clone(sinks)
	slices.SortStableFunc(s, func(a, b string) int { return cmp.Compare(o.last[a], o.last[b]) })
	return s
}

// observe records what a claim for sinks returned.
func (o *claimOrder) observe(sinks []string, rows []*claimedRow) {
	for _, s := range sinks {
		o.last[s] = 0
	}
	for _, row := range rows {
		o.last[row.Sink]++
	}
}
