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

// claimBoundFullSlowdown spaces full claims out when one is slow: the next
// comes no sooner than this many times the last one took. A full claim
// reads the entries of every row delivered since vacuum last ran, which a
// transaction held open keeps for as long as it stays open: 60,000 after
// half a minute at 2,000 messages a second. Once a second, those claims
// and the rows they took were the pickup p99 under a held XID (29 ms
// clean, 72 ms held; 21 ms held with the spacing, bench pressure-xid).
// At most one claim's time in claimBoundFullSlowdown goes to full claims;
// a fast one (a few ms) still comes every claimBoundFullEvery.
const claimBoundFullSlowdown = 50

// claimBoundSlowFull is how long a full claim takes before it spaces the
// next out: one that reads only live rows takes a few ms, and a relay with
// a short poll interval (tests poll every 50 ms) relies on its full claims
// to find rows handed back by a per-key limit soon.
const claimBoundSlowFull = 25 * time.Millisecond

// claimBoundFullMax bounds how far apart a slow full claim spaces the next:
// a row only a full claim finds (an expired lease, a late commit) waits at
// most this long.
const claimBoundFullMax = 5 * time.Second

// claimBounds is where one claim loop's claims start reading each sink's
// rows. Between two full claims, once per poll interval, a sink's walk
// starts claimBoundMargin before the latest available_at the loop claimed
// of it, passing over the entries of rows delivered since: a transaction
// held open keeps vacuum from removing them, and a claim read every one of
// them (thousands after seconds). The full claim finds what a bound passes
// over: expired leases, rows of another relay's claim that rolled back,
// and rows that became ready with an earlier available_at (a producer's
// transaction that committed late, a row whose claim's answer was lost);
// they wait at most a poll interval longer (claimBoundFullMax when full
// claims are slow).
type claimBounds struct {
	latest map[string]time.Time // by sink
	fullAt time.Time            // the next full claim is due then
}

// after returns claim.sql's @after for sinks at now: nil (every walk from
// the start) when the full claim every poll (at most claimBoundFullEvery)
// is due or no sink has a bound,
// the zero time for the sinks without one. full says the claim is a full
// one: its caller reports how long it took to fullTook.
func (b *claimBounds) after(sinks []string, now time.Time, poll time.Duration) (after []time.Time, full bool) {
	if !now.Before(b.fullAt) {
		b.fullAt = now.Add(min(poll, claimBoundFullEvery))
		return nil, true
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
	return out, false
}

// fullTook records that the full claim started at start took took: a slow
// one (claimBoundSlowFull or longer) puts the next off to claimBoundFullSlowdown times as long after its
// start, at most claimBoundFullMax.
func (b *claimBounds) fullTook(start time.Time, took time.Duration) {
	if took < claimBoundSlowFull {
		return
	}
	if next := start.Add(min(claimBoundFullSlowdown*took, claimBoundFullMax)); next.After(b.fullAt) {
		b.fullAt = next
	}
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
