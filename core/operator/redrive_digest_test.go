package operator_test

import (
	"testing"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// A dead member of a digest not yet sent leaves the digest when it is
// redriven, so that the digest's next post carries no row its earlier
// posts did not (docs/digests.md); a dead member of a sent digest keeps
// naming the digest it went out in. (Mutation: redrive.sql leaving
// digest_id alone keeps the first row in its unsent digest.)
func TestRedriveTakesAMemberOutOfItsUnsentDigest(t *testing.T) {
	b := coretest.Setup(t)
	ids := b.EnqueueN(t, "s", 2, nil)
	s := b.Outbox.Schema()
	var unsent, sent int64
	if err := b.Pool.QueryRow(b.Ctx, "INSERT INTO "+s+".digests (sink, key, delivery_id) VALUES ('s', '', 's/digest-a') RETURNING id").Scan(&unsent); err != nil {
		t.Fatal(err)
	}
	if err := b.Pool.QueryRow(b.Ctx, "INSERT INTO "+s+".digests (sink, key, delivery_id, sent_at) VALUES ('s', '', 's/digest-b', now()) RETURNING id").Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+s+".messages SET status = 'dead', digest_id = CASE WHEN id = $1 THEN $2::bigint ELSE $3::bigint END WHERE id = ANY($4)",
		ids[0], unsent, sent, ids); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{IDs: ids}); err != nil || n.Rows != 2 {
		t.Fatalf("redrive: %+v, %v; want both rows moved", n, err)
	}
	want := map[int64]*int64{ids[0]: nil, ids[1]: &sent}
	for id, digest := range want {
		var got *int64
		if err := b.Pool.QueryRow(b.Ctx, "SELECT digest_id FROM "+s+".messages WHERE id = $1", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (digest == nil) || (got != nil && *got != *digest) {
			t.Errorf("row %d redriven names digest %v, want %v", id, deref(got), deref(digest))
		}
	}
}

// deref is *p, or "none" when p is nil.
func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}
