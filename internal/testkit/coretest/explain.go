package coretest

import (
	"encoding/json"
	"testing"
)

// PlanNode is the part of a node of EXPLAIN (FORMAT JSON) that tests read.
type PlanNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []PlanNode `json:"Plans"`
}

// Explain returns the plan PostgreSQL chooses for query with args, and
// the plan as EXPLAIN printed it (for failure messages).
func (b Bundle) Explain(t testing.TB, query string, args ...any) (PlanNode, []byte) {
	t.Helper()
	var raw []byte
	if err := b.Pool.QueryRow(b.Ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan PlanNode }
	if err := json.Unmarshal(raw, &plans); err != nil {
		t.Fatal(err)
	}
	return plans[0].Plan, raw
}

// Walk calls visit on n and then on each node below it, depth first.
func (n PlanNode) Walk(visit func(PlanNode)) {
	visit(n)
	for _, c := range n.Plans {
		c.Walk(visit)
	}
}
