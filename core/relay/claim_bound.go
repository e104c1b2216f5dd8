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
// claims are slow). A slow full claim held its loop for the whole walk,
// and every row committed meanwhile waited for it; while full claims are
// slow, the loop looks for the rows its bounds pass over beside its claims
// instead (a lookout, see lookAside) and starts the next claim's walk of a
// sink at the row found.
type claimBounds struct {
	latest map[string]time.Time // by sink
	fullAt time.Time            // the next full claim is due then
	// aside says the last full claim or lookout was slow (claimBoundSlowFull
	// or longer): the full claims due are then lookouts, run beside the
	// loop's claims (see lookAside), until one is fast again.
	aside bool
	// found holds, by sink, the oldest row a lookout found passed over:
	// the next claim's walk of the sink starts there.
	found map[string]time.Time
}

// after returns claim.sql's @after for sinks at now: nil (every walk from
// the start) when the full claim every poll (at most claimBoundFullEvery)
// is due or no sink has a bound, the zero time for the sinks without one.
// full says the claim is a full one: its caller reports how long it took
// to fullTook. While full claims are slow (aside), a due one is a lookout
// instead: look says to start one with the bounds returned, and the claim
// itself stays bounded. A sink a lookout found a row of starts its walk
// at that row, once.
func (b *claimBounds) after(sinks []string, now time.Time, poll time.Duration) (after []time.Time, full, look bool) {
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
		if f, ok := b.found[s]; ok {
			if f.Before(out[i]) {
				out[i] = f
			}
			delete(b.found, s)
		}
	}
	due := !now.Before(b.fullAt)
	if !due {
		return out, false, false
	}
	b.fullAt = now.Add(min(poll, claimBoundFullEvery))
	if !b.aside || out == nil {
		clear(b.found) // a full claim reads every row they name
		return nil, true, false
	}
	return out, false, true
}

// lookedOut records a lookout started at start that took took and found
// the rows it found (the oldest passed-over row's available_at, by sink).
func (b *claimBounds) lookedOut(start time.Time, took time.Duration, found map[string]time.Time) {
	b.fullTook(start, took)
	for s, t := range found {
		if b.found == nil {
			b.found = make(map[string]time.Time)
		}
		if f, ok := b.found[s]; !ok || t.Before(f) {
			b.found[s] = t
		}
	}
}

// fullTook records that the full claim or lookout started at start took
// took: a slow one (claimBoundSlowFull or longer) puts the next off to
// claimBoundFullSlowdown times as long after its start, at most
// claimBoundFullMax, and makes it a lookout; a fast one makes it a full
// claim again.
func (b *claimBounds) fullTook(start time.Time, took time.Duration) {
	b.aside = took >= claimBoundSlowFull
	if !b.aside {
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
