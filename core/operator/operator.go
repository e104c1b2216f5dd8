// Package operator holds what the people running an outbox ask of it: dead
// letters to inspect, redrive or purge, message lookups, sink pauses, the
// cluster's row counts and their gauges, delivery rates and the console's
// overview. Every call takes the database handle to use and reads bounded
// sets (partial indexes, snapshots), never the whole delivered history. A
// program gets its [Operator] from its front door, outboxd.Outbox.Operator.
package operator

import (
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// Operator runs the operator queries of one outbox schema. It holds no
// connection and is safe for concurrent use. Its actions (pauses, resumes,
// redrives, purges) take the audit.Actor they are done for and are
// recorded in the audit trail in their own transaction.
type Operator struct {
	q     *store.Queries
	trail *audit.Trail
}

// New returns the Operator of q's outbox schema, recording its actions in
// trail. Programs get theirs from the front door (outboxd.Outbox.Operator),
// which makes the one store and trail its engine shares.
func New(q *store.Queries, trail *audit.Trail) *Operator {
	return &Operator{q: q, trail: trail}
}

// Audit returns the audit trail of the operator's schema.
func (o *Operator) Audit() *audit.Trail { return o.trail }

// Schema returns the PostgreSQL schema holding the outbox.
func (o *Operator) Schema() string { return o.q.Schema }
