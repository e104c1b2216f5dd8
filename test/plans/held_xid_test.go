package plans_test

import (
	"context"
	"testing"
)

// heldXIDDelivered is how many delivered rows of the sink leave entries in
// the open index that a held XID keeps vacuum from removing.
const heldXIDDelivered = 20_000

// A claim with a bound (claim.sql's @after, which the relay passes between
// its full claims) does not read the dead index entries of the rows
// delivered before it while a transaction holds an XID open: 20,000 rows
// of the sink delivered (deleted) after the XID was taken and a VACUUM that
// cannot remove them, then 10 new rows; the bounded claim of the 10 reads
// at most a quarter of the buffers the claim from the start reads, which
// visits every dead entry's heap tuple (here 40 to a page; delivered in
// the order of a live load they are spread over many more pages: 7,600
// buffers a claim after 20 s of a held XID at 1,500 msg/s). Measured:
// 835 buffers from the start, 146 bounded. (Mutation: claim.sql's walk without
// "m.available_at >= share.after" fails this test: 835 buffers from the
// start, 933 "bounded".)
func TestBoundedClaimPassesDeadEntriesUnderAHeldXID(t *testing.T) {
	pool := longCluster(t, "loads 20,000 rows", 4)
	ob, q := schemaOn(t, pool, "heldxid")
	ctx := t.Context()
	held, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Rollback(context.Background()) })
	if _, err := held.Exec(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, ob.Schema(),
		`INSERT INTO {s}.messages (sink, dedup_key, payload, available_at)
		 SELECT 'fast', 'old-' || g, '{}', now() - interval '10 minutes' + g * interval '1 ms'
		 FROM generate_series(1, 20000) g`,
		`DELETE FROM {s}.messages WHERE sink = 'fast'`,
		`VACUUM ANALYZE {s}.messages`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload) SELECT 'fast', 'new-' || g, '{}' FROM generate_series(1, 10) g`)

	measure := func(after string) (plan, string) {
		var best plan
		var raw string
		for i := range 3 { // the fewest buffers: the first run sets hint bits
			p, r := explainClaim(t, pool, q, "force_custom_plan", []string{"fast"}, after, 100)
			if int(p.Rows) != 10 {
				t.Fatalf("the claim (after %s) returned %v rows, want the 10 new ones:\n%s", after, p.Rows, r)
			}
			if i == 0 || p.buffers() < best.buffers() {
				best, raw = p, r
			}
		}
		return best, raw
	}
	full, fullRaw := measure("NULL")
	bounded, boundedRaw := measure("ARRAY[now() - interval '1 minute']")
	t.Logf("claim of 10 rows beside %d dead entries: %d buffers from the start, %d bounded", heldXIDDelivered, full.buffers(), bounded.buffers())
	if full.buffers() < heldXIDDelivered/40 {
		t.Fatalf("the claim from the start read only %d buffers: the dead entries were not there to read:\n%s", full.buffers(), fullRaw)
	}
	if bounded.buffers()*4 > full.buffers() {
		t.Errorf("the bounded claim read %d buffers, the claim from the start %d: the bound does not pass the dead entries:\n%s",
			bounded.buffers(), full.buffers(), boundedRaw)
	}
}
