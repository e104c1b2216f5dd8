package api

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testkit/consoletest"
)

// slowQueryTimeout is http.query_timeout in TestSlowQueriesAnswer503WithinTheQueryTimeout.
const slowQueryTimeout = 500 * time.Millisecond

// slowAnswerBound is how long a request whose query is held up may take
// to answer at most: the timeout and a wide margin for a loaded machine,
// far below the minute a hung request would take (the server's write
// timeout, the test's context).
const slowAnswerBound = slowQueryTimeout + 4*time.Second

// A query held up by a lock (the test holds an exclusive lock on the table
// the endpoint reads) is cancelled by the server after http.query_timeout:
// the API answers 503 naming the setting, the console a 503 page saying
// so, in time; no statement of theirs is left waiting on the lock, and once
// the lock is gone the same requests succeed on the same pool.
// (Mutations: apidb.Open not setting statement_timeout fails this test:
// the requests end at their context deadline but their backends still wait
// on the lock; internalError answering every failure 500 fails it too.)
func TestSlowQueriesAnswer503WithinTheQueryTimeout(t *testing.T) {
	t.Parallel()
	a := newOperatorAPI(t, strings.Replace(operatorConfig, "http:\n", "http:\n  query_timeout: "+slowQueryTimeout.String()+"\n", 1))
	browser := consoletest.New(t, a.srv.URL)
	browser.SignIn(operatorToken)
	a.deadRows(t, "partner", "boom")
	for _, c := range []struct {
		name, table string
		get         func() (int, string)
	}{
		{"GET /v1/stats", "sink_stats_lead", func() (int, string) { return a.get(t, "/v1/stats") }},
		{"GET /v1/dlq", "messages", func() (int, string) { return a.get(t, "/v1/dlq") }},
		{"console /dead-letters", "messages", func() (int, string) {
			resp, body := browser.Get("/dead-letters")
			return resp.StatusCode, body
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := a.lock(t, c.table)
			start := time.Now()
			code, body := c.get()
			took := time.Since(start)
			if code != http.StatusServiceUnavailable || !strings.Contains(body, "http.query_timeout") {
				t.Errorf("held up by a lock on %s: %d %s; want 503 naming http.query_timeout", c.table, code, body)
			}
			if took > slowAnswerBound {
				t.Errorf("answered after %s, want within %s", took, slowAnswerBound)
			}
			if n := a.waitingOn(t, c.table); n > 0 {
				t.Errorf("%d statements still wait on the lock after the answer: the slow query still holds its connection", n)
			}
			release()
			if code, body := c.get(); code != http.StatusOK {
				t.Errorf("after the lock is released: %d %s", code, body)
			}
		})
	}
}

// get sends GET path with the token and returns the status and body.
func (a *operatorAPI) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(a.ctx, "GET", a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	if _, err := io.Copy(&body, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.String()
}

// lock takes an exclusive lock on table of the test's schema, in a
// transaction of the test's own pool, until release.
func (a *operatorAPI) lock(t *testing.T, table string) (release func()) {
	t.Helper()
	tx, err := a.pool.Begin(a.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(a.ctx, "LOCK TABLE "+pgx.Identifier{a.ob.Schema(), table}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release = func() {
		if !released {
			released = true
			_ = tx.Rollback(context.WithoutCancel(a.ctx))
		}
	}
	t.Cleanup(release)
	return release
}

// waitingOn counts the lock requests on table of the test's schema that
// wait (every one but the test's own).
func (a *operatorAPI) waitingOn(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := a.pool.QueryRow(a.ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`,
		pgx.Identifier{a.ob.Schema(), table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
