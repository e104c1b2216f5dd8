package operator_test

import (
	"encoding/json"
	"testing"

	"github.com/outboxd/outboxd/internal/coretest"
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
