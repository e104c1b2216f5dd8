package relay

import "time"

// claimBoundMargin is how far before the latest row a claim loop took of a
// sink its next claims of that sink start reading (claim.sql's @after): a
// producer's row whose available_at (its transaction's start) is earlier
// than a row claimed already is still found at once when its transaction
// committed within this time, and the dead index entries read are those of
// the rows delivered within it.
const claimBoundMargin = 250 * time.Millisecond

// claimBoundFullEvery is the longest a claim loop goes between full claims
// however long its poll interval: a row a bound passes over (one left
// behind while its sink's breaker was open, as a probe took a later row)
// waits at most this long, not a poll interval of 30 s.
const claimBoundFullEvery = time.Second

// claimBounds is where one claim loop's claims start reading each sink's
// rows. Between two full claims, once per poll interval, a sink's walk
// starts claimBoundMargin before the latest available_at the loop claimed
// of it, passing over the entries of rows delivered since: a transaction
// held open keeps vacuum from removing them, and a claim read every one of
// them (thousands after seconds). The full claim finds what a bound passes
// over: expired leases, rows of another relay's claim that rolled back,
// and rows that became ready with an earlier available_at (a producer's
// transaction that committed late, a row whose claim's answer was lost);
// they wait at most a poll interval longer.
type claimBounds struct {
	latest map[string]time.Time // by sink
	fullAt time.Time            // the next full claim is due then
}

// after returns claim.sql's @after for sinks at now: nil (every walk from
// the start) when the full claim every poll (at most claimBoundFullEvery)
// is due or no sink has a bound,
// the zero time for the sinks without one.
func (b *claimBounds) after(sinks []string, now time.Time, poll time.Duration) []time.Time {
	if !now.Before(b.fullAt) {
		b.fullAt = now.Add(min(poll, claimBoundFullEvery))
		return nil
	}
	var out []time.Time
	for i, s := range sinks {
		t, ok := b.latest[s]
		if !ok {
			continue
		}
		if out == nil {
			out = make([]time.Time, len(sinks))
		}
		out[i] = t.Add(-claimBoundMargin)
	}
	return out
}

// observe records the rows a claim took.
func (b *claimBounds) observe(rows []*claimedRow) {
	for _, row := range rows {
		if b.latest == nil {
			b.latest = make(map[string]time.Time)
		}
		if row.availableAt.After(b.latest[row.Sink]) {
			b.latest[row.Sink] = row.availableAt
		}
	}
}
