package relay

import (
	"testing"
	"time"
)

// A per-key loop whose claims find one key grows them one row at a time,
// but never past the deliveries the key may still start on this relay: a
// key with one slot left after a claim of one row has its next claim take
// one row, not two of which one goes back. (Mutation: observe growing the
// limit past admission.left fails this test, and
// TestKeyAtItsLimitHasItsRowsLeftAlone "at its share of the slots" saw 94
// row updates for 42 deliveries under load with it, 44 without.)
func TestKeyedClaimsGrowNoFurtherThanTheKeyMayStart(t *testing.T) {
	t.Parallel()
	const poll = 50 * time.Millisecond
	k := newKeyedClaims(100)
	for _, c := range []struct {
		left, want int
	}{{left: 5, want: 2}, {left: 5, want: 3}, {left: 1, want: 1}, {left: 1, want: 1}, {left: 4, want: 2}} {
		limit := k.limit
		d := keyedDispatch{started: limit, admission: admission{keys: 1, left: c.left}}
		if wait, _ := k.observe(limit, limit, d, false, poll); wait != 0 {
			t.Fatalf("a key with room left: wait %s, want a claim at once", wait)
		}
		if k.limit != c.want {
			t.Fatalf("after a claim of %d rows, all started, %d slots left: next claim %d rows, want %d", limit, c.left, k.limit, c.want)
		}
	}
}
