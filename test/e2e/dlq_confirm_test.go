package e2e_test

import (
	"context"
	"fmt"
	"testing"
)

// The reproduction against the binary: id 1 failed, ids 2 and 3
// dead; the dry run of an "all" purge counts 2; id 1 dies; the confirmation
// with the dry run's token purges the 2 counted and leaves id 1. A
// confirmation by id bound alone (up_to_id, as before) is refused and
// deletes nothing.
// (Mutation: purge.sql without the @dead_until bound fails this test: id
// 1's death then changes the counted set, and the confirmation is refused
// instead of purging the 2 counted.)
func TestConfirmedPurgeOverHTTPLeavesRowsThatDiedAfterTheCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "  token: "+apiToken)
	e.mustRun("migrate")
	srv := e.serve()
	ctx := context.Background()
	// Sink "gone" is configured nowhere: no relay touches its rows.
	var ids [3]int64
	for i, status := range []string{"failed", "dead", "dead"} {
		if err := e.pool.QueryRow(ctx, "INSERT INTO "+e.schema+`.messages (sink, dedup_key, payload, status, attempts, last_error)
			VALUES ('gone', $1, '{}', $2, 1, '503') RETURNING id`, fmt.Sprint("k", i), status).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	purge := srv.url("/v1/dlq/purge")
	code, plan := call(t, "POST", purge, apiToken, `{"all": true, "dry_run": true}`)
	if code != 200 || plan["purged"] != 2.0 || plan["last_id"] != float64(ids[2]) || plan["token"] == nil {
		t.Fatalf("dry run: %d %v", code, plan)
	}
	if _, err := e.pool.Exec(ctx, "UPDATE "+e.schema+".messages SET status = 'dead', updated_at = now() WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, "POST", purge, apiToken, fmt.Sprintf(`{"all": true, "up_to_id": %d}`, ids[2])); code != 422 || e.rowCount() != 3 {
		t.Fatalf("confirmation by up_to_id: %d %v, %d rows; want 422 and nothing deleted", code, body, e.rowCount())
	}
	code, done := call(t, "POST", purge, apiToken, fmt.Sprintf(`{"all": true, "token": %q}`, plan["token"]))
	if code != 200 || done["purged"] != 2.0 || e.rowCount() != 1 {
		t.Fatalf("confirmed purge: %d %v, %d rows left; want the 2 counted purged", code, done, e.rowCount())
	}
	var left int64
	if err := e.pool.QueryRow(ctx, "SELECT id FROM "+e.schema+".messages_all").Scan(&left); err != nil || left != ids[0] {
		t.Fatalf("row left: %d, %v; want %d, which died after the count", left, err, ids[0])
	}
	code, again := call(t, "POST", purge, apiToken, fmt.Sprintf(`{"all": true, "token": %q}`, plan["token"]))
	if code != 409 || again["rows"] != 1.0 || again["token"] == nil || e.rowCount() != 1 {
		t.Fatalf("the same confirmation again: %d %v; want 409 with the new count 1", code, again)
	}
}
