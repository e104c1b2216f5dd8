package destinations_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestHostilePatternsCannotBreakPublishing (issue 41, finding 1), with
// the real binary: a tenant's 9,001-byte "**." pattern and a 17-segment
// one are refused with 422 naming events[0] by the API and by
// `outboxd destinations create`; the same patterns written into the
// table directly (past every check) make no publish fail: one SQL
// transaction that writes the producer's order, publishes for acme, for
// the hostile tenant and for acme again commits whole, a publish for the
// hostile tenant over HTTP succeeds, and acme's endpoint receives both
// of its events.
//
// Mutation: on today's code (8c4a765: syntax checked alone, patterns
// matched as regular expressions) the API creates the 9,001-byte pattern
// (201, not 422) and fails it; with the checks kept but
// event_patterns_match() matching as a regular expression, the SQL
// transaction fails with SQLSTATE 2201B.
func TestHostilePatternsCannotBreakPublishing(t *testing.T) {
	t.Parallel()
	o := serve(t, setup{})
	rcv := newReceiver(t)
	o.create(t, rcv, "acme", "order.*")
	huge := strings.Repeat("**.", 3000) + "x"
	deep := strings.Repeat("a.", 16) + "**"
	for pattern, says := range map[string]string{
		huge: "events[0]: pattern is 9001 bytes, over the limit of 256",
		deep: "events[0]: pattern has 17 segments, over the limit of 16",
	} {
		body, _ := json.Marshal(map[string]any{"url": rcv.URL + "/hostile", "events": []string{pattern}})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, o.api+"/v1/tenants/hostile/destinations", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(raw), says) {
			t.Errorf("POST a destination with a %d-byte pattern: %d %.200s; want 422 saying %q", len(pattern), resp.StatusCode, raw, says)
		}
		r, err := proc.Run(t.Context(), binary, o.env, nil, "--config", o.config,
			"destinations", "create", "--tenant", "hostile", "--url", rcv.URL+"/hostile", "--events", pattern)
		if err != nil || r.Code == 0 || !strings.Contains(r.Stderr, says) {
			t.Errorf("destinations create with a %d-byte pattern: %v, exit %d, %.200s; want a refusal saying %q", len(pattern), err, r.Code, r.Stderr, says)
		}
	}

	ctx := t.Context()
	if _, err := o.pool.Exec(ctx, `INSERT INTO `+o.schema+`.destinations (id, tenant, url, events, revision)
		VALUES ('dst_hostile1', 'hostile', $1, $2, 0), ('dst_hostile2', 'hostile', $1, $3, 0)`,
		rcv.URL+"/hostile", []string{huge}, []string{deep, "(a+)+$"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.pool.Exec(ctx, "CREATE TABLE "+o.schema+".orders (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := o.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "INSERT INTO "+o.schema+".orders VALUES ('o-1')"); err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"acme", "hostile", "acme"} {
		order := fmt.Sprintf("o-%d", i)
		data := fmt.Sprintf(`{"account_id": %q, "order": %q}`, tenant, order)
		if _, err := tx.Exec(ctx, `SELECT * FROM `+o.schema+`.publish('order.created', $1, $2::jsonb)`, order, data); err != nil {
			t.Fatalf("publish %d, for %s: %v", i, tenant, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o.publishHTTP(t, "order.created", "hostile", "o-3")
	testrelay.WaitFor(t, deliveryTimeout, "acme's two events", func() bool { return rcv.count("/acme") == 2 })
	var orders int
	if err := o.pool.QueryRow(ctx, "SELECT count(*) FROM "+o.schema+".orders").Scan(&orders); err != nil || orders != 1 {
		t.Fatalf("orders after commit: %d, %v; want the producer's row", orders, err)
	}
	if n := rcv.count("/hostile"); n != 0 {
		t.Errorf("the hostile tenant's endpoint got %d requests; its patterns over the bounds match nothing", n)
	}
}
