package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// With a long delivered history and a backlog, the claim must read ready rows
// through the partial index in order: no sequential scan of messages (it
// would read every sent row) and no sort of the backlog. The claim does sort
// what is already bounded: its two kinds of candidate, each a LIMIT of the
// share, and the heads of keys with queued rows, one a key, found by TID
// (migration 017). (Mutation: the walk of claim.sql in created_at order,
// which the open index does not hold, fails this test: a Sort above a
// bitmap scan of messages_open_idx.)
func TestClaimPlanSkipsHistoryAndDoesNotSortBacklog(t *testing.T) {
	b := coretest.Setup(t)
	const sent, backlog = 200_000, 50_000
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, sent_at, created_at, available_at)
		  SELECT 'hist', 'h' || g, '{}', 'sent', 1, now() - interval '1 hour', now() - interval '2 hours', now() - interval '2 hours'
		  FROM generate_series(1, $1::int) g`, []any{sent}},
		{`INSERT INTO {s}.messages (sink, dedup_key, payload, ordering_key, available_at)
		  SELECT 'work', 'w' || g, '{}', CASE WHEN g % 3 = 0 THEN 'k' || (g % 100) END, now() - (g || ' ms')::interval
		  FROM generate_series(1, $1::int) g`, []any{backlog}},
		{`ANALYZE {s}.messages`, nil},
	} {
		if _, err := b.Pool.Exec(b.Ctx, strings.ReplaceAll(stmt.sql, "{s}", b.Outbox.Schema()), stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	// The named parameters of claim.sql, in their $n order: sinks,
	// after, probe_sink, limit, alive_for, waiter, token, lease, durable_sinks.
	plan, raw := b.Explain(t, q.Texts().Claim, []string{"work"}, []time.Time(nil), "", 1000, time.Minute, 0, uuid.New(), 30*time.Second, []string(nil))
	indexes := map[string]bool{}
	plan.Walk(func(n coretest.PlanNode) {
		if n.NodeType == "Seq Scan" && n.Relation == "messages" {
			t.Errorf("the claim scans the whole messages table (sent history included):\n%s", raw)
		}
		if (n.NodeType == "Sort" || n.NodeType == "Incremental Sort") && readsUnlimited(n) {
			t.Errorf("the claim sorts the backlog:\n%s", raw)
		}
		if n.IndexName != "" {
			indexes[n.IndexName] = true
		}
	})
	for _, want := range []string{"messages_open_idx"} {
		if !indexes[want] {
			t.Errorf("the claim does not use %s (uses %v):\n%s", want, indexes, raw)
		}
	}
}

// readsUnlimited reports whether n reads the open rows of messages, whole
// or through the open index, with no LIMIT between: a sort above such a
// scan sorts whatever the scan finds, the backlog.
func readsUnlimited(n coretest.PlanNode) bool {
	for _, c := range n.Plans {
		switch {
		case c.NodeType == "Limit":
		case c.NodeType == "Seq Scan" && c.Relation == "messages", c.IndexName == "messages_open_idx":
			return true
		case readsUnlimited(c):
			return true
		}
	}
	return false
}
