package operator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testdb"
)

// recordingSink remembers every delivery, in the order they started, and
// signals each one.
type recordingSink struct {
	mu        sync.Mutex
	delivered []sink.Delivery
	fail      func(d *sink.Delivery) error // nil: every delivery succeeds
	signal    chan struct{}
}

func newRecordingSink() *recordingSink {
	return &recordingSink{signal: make(chan struct{}, 1)}
}

func (s *recordingSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	if s.fail != nil {
		if err := s.fail(d); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.delivered = append(s.delivered, *d)
	s.mu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
	return nil
}

func (s *recordingSink) snapshot() []sink.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sink.Delivery(nil), s.delivered...)
}

// bundle is what setup returns: an outbox in a schema of its own, a pool
// on it, and a context that ends with the test.
type bundle struct {
	pool *pgxpool.Pool
	ob   *testdb.Outbox
	ctx  context.Context
}

func setup(t *testing.T) bundle {
	t.Helper()
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return bundle{pool: pool, ob: ob, ctx: ctx}
}

// statusCounts returns the number of rows per status.
func statusCounts(t *testing.T, b bundle) map[string]int {
	t.Helper()
	return testdb.StatusCounts(t, b.pool, b.ob, "")
}

func enqueueN(t *testing.T, b bundle, sink string, n int, mutate func(i int, m *core.Message)) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	const chunk = 1000
	for start := 0; start < n; start += chunk {
		var msgs []core.Message
		for i := start; i < min(n, start+chunk); i++ {
			m := core.Message{Sink: sink, DedupKey: fmt.Sprintf("k-%d", i), Payload: map[string]int{"n": i}}
			if mutate != nil {
				mutate(i, &m)
			}
			msgs = append(msgs, m)
		}
		res, err := b.ob.EnqueueBatch(b.ctx, b.pool, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// planNode is the part of EXPLAIN (FORMAT JSON) this test reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// explain returns the plan PostgreSQL chooses for query with args, and
// the plan as EXPLAIN printed it (for failure messages).
func explain(t *testing.T, b bundle, query string, args ...any) (planNode, []byte) {
	t.Helper()
	var raw []byte
	if err := b.pool.QueryRow(b.ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
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
