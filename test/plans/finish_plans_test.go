package plans_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
)

// finishParams are the parameter types of finish.sql in their $n order:
// ids, tokens, statuses, delays, errors, refunds, deferred, receipts,
// delete_sent.
const finishParams = "bigint[], uuid[], text[], float8[], text[], int[], int[], jsonb, jsonb, boolean"

// finishOutcomes is how many outcomes each EXPLAIN of finish.sql writes,
// as one terminal write of a busy relay does: half delivered (moved to
// history with a receipt each, keys kept), a quarter failed with an
// error (recorded in failed_attempts), a quarter put off by a
// Retry-After.
const finishOutcomes = 1000

// finishTables are the tables finish.sql reads or writes by key that grow
// with the traffic; none may be read whole. (history_slots, a ring of a
// few rows, may be.)
var finishTables = []string{"messages", "message_keys", "messages_history", "failed_attempts", "digests", "threads"}

// Plans that do not depend on luck, for the terminal write: finish.sql
// writing 1,000 outcomes (500 delivered, 250 failed, 250 deferred) into
// a table of 100,000 rows finds each row through the primary key, never
// a scan of the whole table, under the generic plan a cached statement
// gets and under the custom plan, in each state a deployment meets: a
// schema never analyzed right after a bulk load (a new deployment, or a
// restore: pg_restore leaves no statistics), statistics of an empty
// outbox (the normal state of a healthy one, then a burst), statistics
// of a table emptied and vacuumed, and right after the history rotated to
// a new, empty slot. Measured: index scans
// of messages_pkey once per outcome, 10.4-11.5 buffers per outcome in every
// case, and the outcomes read once. (Mutations: "SET enable_indexscan =
// off, enable_bitmapscan = off" before the EXPLAIN, standing for a planner
// that prefers a scan on a table it believes empty, fails this test with a
// Seq Scan on messages; finish.sql joining the outcomes to messages by id,
// as before the LATERAL lookup, fails it with the outcomes' CTE scanned
// once per row.)
func TestFinishPlansStayIndexPlansWithoutStatistics(t *testing.T) {
	pool := longCluster(t, "loads 100,000 rows per case", 4)
	cases := []struct {
		name  string
		setup []string
	}{
		{"never analyzed after a bulk load", nil},
		{"statistics of an empty outbox", []string{
			`ALTER TABLE {s}.messages SET (autovacuum_enabled = off)`,
			`ALTER TABLE {s}.message_keys SET (autovacuum_enabled = off)`,
			`ANALYZE {s}.messages`, `ANALYZE {s}.message_keys`,
		}},
		// A table whose rows were all delivered and vacuumed: its
		// statistics say it holds next to nothing (a healthy outbox
		// between bursts).
		{"emptied and vacuumed", []string{
			`ALTER TABLE {s}.messages SET (autovacuum_enabled = off)`,
			`INSERT INTO {s}.messages (sink, dedup_key, payload)
			 SELECT 'old', 'o' || g, '{"n":1}' FROM generate_series(1, 100000) g`,
			`DELETE FROM {s}.messages`, `VACUUM ANALYZE {s}.messages`,
		}},
		// The second rotation finds no free slot and attaches a new,
		// never analyzed partition as the current one.
		{"a new history slot", []string{
			`SELECT {s}.history_rotate(interval '0 seconds', interval '1 second')`,
			`SELECT {s}.history_rotate(interval '0 seconds', interval '1 second')`,
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ob, q := schemaOn(t, pool, fmt.Sprintf("finish%d", i))
			s := ob.Schema()
			exec(t, pool, s, c.setup...)
			exec(t, pool, s,
				`INSERT INTO {s}.messages (sink, dedup_key, payload)
				 SELECT 'fast', 'f' || g, '{"n":1}' FROM generate_series(1, 100000) g`)
			for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
				for _, deleteSent := range []bool{false, true} {
					what := fmt.Sprintf("%s, delete_sent %t", mode, deleteSent)
					p, raw := explainFinish(t, pool, q, s, mode, deleteSent)
					if p.Rows != finishOutcomes {
						t.Fatalf("%s: finish wrote %v outcomes, want %d:\n%s", what, p.Rows, finishOutcomes, raw)
					}
					checkFinishPlan(t, what, p, raw)
				}
			}
		})
	}
}

// checkFinishPlan fails the test when a node of p that ran reads one of
// finishTables whole, when p reads the outcomes again for each row (a CTE
// or function scan run more than once: a nested loop over the outcomes,
// which reads no buffer but takes a million steps for 1,000 outcomes), or
// when p reads more than 30 buffers per outcome in all. (A node that never
// ran is the plan of a branch the parameters turn off, such as the key
// deletion without delete_sent.)
func checkFinishPlan(t *testing.T, mode string, p plan, raw string) {
	t.Helper()
	var scans, rescans []string
	check := func(n plan) {
		for _, table := range finishTables {
			if n.NodeType == "Seq Scan" && n.Relation == table && n.Loops > 0 {
				scans = append(scans, table)
			}
		}
		if (n.NodeType == "CTE Scan" || n.NodeType == "Function Scan") && n.Loops > 1 {
			rescans = append(rescans, fmt.Sprintf("%s run %.0f times", n.NodeType, n.Loops))
		}
	}
	check(p)
	p.walk(func(_, n plan) { check(n) })
	if len(scans) > 0 {
		t.Errorf("%s: finish reads %s whole:\n%s", mode, strings.Join(scans, ", "), raw)
	}
	if len(rescans) > 0 {
		t.Errorf("%s: finish reads the outcomes once per row (%s):\n%s", mode, strings.Join(rescans, ", "), raw)
	}
	perOutcome := float64(p.buffers()) / finishOutcomes
	t.Logf("%s: %d buffers, %.1f per outcome", mode, p.buffers(), perOutcome)
	if perOutcome > 30 {
		t.Errorf("%s: finish reads %.1f buffers per outcome:\n%s", mode, perOutcome, raw)
	}
}

// explainFinish claims finishOutcomes rows of schema's outbox by hand (as
// the claim does: in progress, a lease token each), then runs finish.sql
// for them under the plan mode given, with delete_sent or not, in a transaction it rolls back, and
// returns EXPLAIN (ANALYZE, BUFFERS) of it.
func explainFinish(t *testing.T, pool *pgxpool.Pool, q *store.Queries, schema, mode string, deleteSent bool) (plan, string) {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(ctx, fmt.Sprintf(`UPDATE %s.messages SET status = 'in_progress', attempts = 1,
		lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'
		WHERE id IN (SELECT id FROM %[1]s.messages ORDER BY id LIMIT %d)
		RETURNING id, lease_token::text`, schema, finishOutcomes))
	if err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		ID    int64
		Token string
	}
	leased, err := pgx.CollectRows(rows, pgx.RowToStructByPos[claimed])
	if err != nil {
		t.Fatal(err)
	}
	// As the completer passes them: the outcomes that are not deliveries
	// with all their arrays, then the delivered ones with an id and a
	// token alone.
	var ids, tokens, statuses, delays, errs, receipts, details, zeros, deferred []string
	var sentIDs, sentTokens []string
	for i, c := range leased {
		status, delay, errText, deferral := "failed", "30", `"receiver answered 503"`, "0"
		// Every outcome's attempt details (migration 031), as an HTTP
		// sink's are.
		details = append(details, fmt.Sprintf(`"%d/%s": {"started_at": "2026-01-02T14:00:00Z", "duration_ms": 12.5, "status": 503}`, c.ID, c.Token))
		switch i % 4 {
		case 0, 2:
			sentIDs, sentTokens = append(sentIDs, fmt.Sprint(c.ID)), append(sentTokens, c.Token)
			receipts = append(receipts, fmt.Sprintf(`"%d/%s": {"ts": "1712345678.%06d"}`, c.ID, c.Token, i))
			continue
		case 3:
			status, delay, errText, deferral = "pending", "60", "NULL", "1"
		}
		ids, tokens = append(ids, fmt.Sprint(c.ID)), append(tokens, c.Token)
		statuses = append(statuses, status)
		delays = append(delays, delay)
		errs = append(errs, errText)
		zeros = append(zeros, "0")
		deferred = append(deferred, deferral)
	}
	ids, tokens = append(ids, sentIDs...), append(tokens, sentTokens...)
	array := func(xs []string) string { return "'{" + strings.Join(xs, ",") + "}'" }
	object := array // a JSON object's literal is written as an array's
	return explainPrepared(t, tx, mode, store.RelaySession(), finishParams, q.Texts().Finish, fmt.Sprintf("%s, %s, %s, %s, %s, %s, %s, %s, %s, %t",
		array(ids), array(tokens), array(statuses), array(delays), array(errs), array(zeros), array(deferred), object(receipts), object(details), deleteSent))
}

// The terminal write keeps the generic plan the plan cache makes after
// its first five runs, for batches of one outcome and of a thousand, with
// delete_sent or not. Planned anew at every write, a write of a few
// outcomes took 0.15-0.35 ms longer (bench latency: 1.03-1.23 ms against
// 0.88-0.90), and planning a 1,000-row write takes 1.4-2.3 ms.
// (Mutation: the leased outcomes filtered by status <> 'sent', as when
// this test was written, fails it: every run of the small batches is
// planned anew, 0 generic plans of 12.)
func TestFinishKeepsItsGenericPlanForAnyBatchSize(t *testing.T) {
	pool := longCluster(t, "a cluster of its own: the plan cache's choice depends on the server's settings", 4)
	ob, q := schemaOn(t, pool, "finishcache")
	exec(t, pool, ob.Schema(), `INSERT INTO {s}.messages (sink, dedup_key, payload)
		SELECT 'fast', 'f' || g, '{"n":1}' FROM generate_series(1, 20000) g`, `VACUUM ANALYZE {s}.messages`)
	const runs = 12
	for _, size := range []int{1, 6, finishOutcomes} {
		for _, deleteSent := range []bool{false, true} {
			what := fmt.Sprintf("%d outcomes, delete_sent %t", size, deleteSent)
			generic, custom := finishPlansMade(t, pool, q, size, deleteSent, runs)
			t.Logf("%s: %d generic plans, %d custom", what, generic, custom)
			if generic != runs-5 {
				t.Errorf("%s: %d of %d runs used the generic plan, want all but the first five (%d planned with their values)", what, generic, runs, custom)
			}
		}
	}
}

// finishPlansMade runs finish.sql runs times on a connection of its own
// with size outcomes (of rows that do not exist: the plan is what is
// measured), under the relay's session settings, and returns how many of
// the runs used the cached generic plan and how many were planned anew.
func finishPlansMade(t *testing.T, pool *pgxpool.Pool, q *store.Queries, size int, deleteSent bool, runs int) (generic, custom int64) {
	t.Helper()
	ctx := t.Context()
	config := pool.Config().ConnConfig.Copy()
	maps.Copy(config.RuntimeParams, store.RelaySession()) // as the relay's pool does
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// As the completer passes them: the outcomes that are not deliveries
	// with all their arrays, then the delivered ones with an id and a
	// token alone.
	p := store.FinishParams{DeleteSent: deleteSent, Statuses: []string{}, Delays: []float64{}, Errors: []*string{},
		Refunds: []int32{}, Deferred: []int32{}}
	var sent []int64
	for i := range size {
		id := -int64(i + 1)
		status := []string{"sent", "sent", "failed", "pending"}[i%4]
		if status == "sent" {
			sent = append(sent, id)
			continue
		}
		p.IDs, p.Tokens, p.Statuses = append(p.IDs, id), append(p.Tokens, [16]byte{1}), append(p.Statuses, status)
		p.Delays, p.Errors = append(p.Delays, 0), append(p.Errors, nil)
		p.Refunds, p.Deferred = append(p.Refunds, 0), append(p.Deferred, 0)
	}
	for _, id := range sent {
		p.IDs, p.Tokens = append(p.IDs, id), append(p.Tokens, [16]byte{1})
	}
	for range runs {
		if _, err := q.Finish(ctx, conn, p); err != nil {
			t.Fatal(err)
		}
	}
	err = conn.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
		q.Texts().Finish).Scan(&generic, &custom)
	if err != nil {
		t.Fatalf("the finish statement's plans: %v", err)
	}
	return generic, custom
}
