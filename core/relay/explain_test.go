package relay_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/outboxd/outboxd/internal/coretest"
	"github.com/outboxd/outboxd/internal/store"
)

// planNode is the part of EXPLAIN (FORMAT JSON) this test reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// explain returns the plan PostgreSQL chooses for query with args, and
// the plan as EXPLAIN printed it (for failure messages).
func explain(t *testing.T, b coretest.Bundle, query string, args ...any) (planNode, []byte) {
	t.Helper()
	var raw []byte
	if err := b.Pool.QueryRow(b.Ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(raw, &plans); err != nil {
		t.Fatal(err)
	}
	return plans[0].Plan, raw
}

func (n planNode) walk(visit func(planNode)) {
	visit(n)
	for _, c := range n.Plans {
		c.walk(visit)
	}
}

// With a long delivered history and a backlog, the claim must read ready rows
// through the partial index in order: no sequential scan of messages (it
// would read every sent row) and no sort of the backlog.
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
	plan, raw := explain(t, b, q.Claim, 1000, 30*time.Second, []string{"work"}, uuid.New(), 0, time.Minute)
	indexes := map[string]bool{}
	plan.walk(func(n planNode) {
		if n.NodeType == "Seq Scan" && n.Relation == "messages" {
			t.Errorf("the claim scans the whole messages table (sent history included):\n%s", raw)
		}
		if n.NodeType == "Sort" || n.NodeType == "Incremental Sort" {
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
