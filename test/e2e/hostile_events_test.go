package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Hostile event data against the binary: POST /v1/events answers 422
// naming the field, never a 500, for data jsonb cannot store (\u0000, a
// lone surrogate) and for thread keys over the limit, explicit or made by a
// route's template from the data; publish() in SQL refuses the derived one
// with SQLSTATE 22023 naming the route, not 54000. Nothing is stored.
// (Mutations, each failing this test: migration 007 without the derived
// keys' check (the 3 KB derived key is stored: 201, and publish() in SQL
// succeeds); core's encodeEvent without jsonbEscapeProblem (\u0000
// answers 500).)
func TestHostileEventDataIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "  token: "+apiToken+`
routes:
  customers:
    events: [order.*]
    to:
      - sink: audit
        template: {thread_key: "c-{{.data.customer}}"}`)
	e.mustRun("migrate")
	srv := e.serve()
	long := strings.Repeat("x", 3000)
	for _, c := range []struct{ body, field string }{
		{`{"type": "order.created", "key": "k", "data": {"customer": "a\u0000b"}}`, "data: \\u0000"},
		{`{"type": "order.created", "key": "k", "data": {"customer": "\ud800"}}`, "data: \\ud800"},
		{`{"type": "order.created", "key": "k", "data": {"customer": "` + long + `"}}`, "route customers: its thread_key template makes a thread key of 3002 bytes"},
		{`{"type": "order.created", "key": "k", "data": {"customer": "ann"}, "thread_key": "` + long + `"}`, "thread_key is 3000 bytes"},
	} {
		code, body := call(t, "POST", srv.url("/v1/events"), apiToken, c.body)
		if msg, _ := body["error"].(string); code != 422 || !strings.Contains(msg, c.field) {
			t.Errorf("POST /v1/events %.80s: %d %v, want 422 naming %q", c.body, code, body, c.field)
		}
	}
	_, err := e.pool.Exec(context.Background(), "SELECT * FROM "+e.schema+".publish('order.created', 'k', jsonb_build_object('customer', repeat('x', 3000)))")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "route customers") {
		t.Errorf("publish() in SQL with a 3 KB derived thread key: %v, want SQLSTATE 22023 naming the route", err)
	}
	if n := e.rowCount(); n != 0 {
		t.Errorf("%d rows stored by refused events", n)
	}
}
