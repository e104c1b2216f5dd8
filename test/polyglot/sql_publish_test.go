package polyglot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// publishRoutes sends order events to the webhook sink "hook", in the
// Standard Webhooks envelope; it follows the sinks block of newOutbox.
const publishRoutes = "routes:\n  orders: {events: [order.*], to: [hook]}\n"

// TestNodePublishIsDeliveredOnCommitOnly runs examples/node/publish.mjs
// (npm's pg, a transaction around <schema>.publish()) against `outboxd
// serve` polling every 10 s: the committed event is delivered within
// wokenWithin, in the envelope its route gives it; the rolled-back one
// never; publishing it again finds the row; a bad event exits 2 with
// SQLSTATE 22023 and an unrouted one with P0002.
// (Mutation: publish_batch giving a repeated (type, key) a fresh dedup key
// fails this test: the repeat prints a created row.)
func TestNodePublishIsDeliveredOnCommitOnly(t *testing.T) {
	t.Parallel()
	requireNodeExamples(t)
	rcv := newReceiver(t)
	o := newOutbox(t, webhookSink("hook", rcv.URL, "")+publishRoutes)
	o.serve(t)
	env := []string{"DATABASE_URL=" + testdb.URL(), "OUTBOXD_DATABASE_SCHEMA=" + o.schema}

	if out, code := node(t, append(env, "ROLLBACK=1"), "publish.mjs", "order.created", "node-rolled-back", `{"id": 1}`); code != 0 || out != "rolled back 1 rows\n" {
		t.Fatalf("rollback: exit %d\n%s", code, out)
	}
	out, code := node(t, env, "publish.mjs", "order.created", "node-committed", `{"id": 2}`)
	committed := time.Now()
	if code != 0 || !strings.HasPrefix(out, "created hook ") {
		t.Fatalf("commit: exit %d\n%s", code, out)
	}
	got := rcv.awaitWoken(t, "order.created/node-committed/orders", committed)
	var envelope struct {
		Type string
		Data map[string]any
	}
	if err := json.Unmarshal([]byte(got.body), &envelope); err != nil || envelope.Type != "order.created" || envelope.Data["id"] != 2.0 {
		t.Fatalf("delivered body %s, want the event's envelope", got.body)
	}

	again, code := node(t, env, "publish.mjs", "order.created", "node-committed", `{"id": 2}`)
	if code != 0 || again != strings.Replace(out, "created", "duplicate", 1) {
		t.Fatalf("repeat: exit %d, %q; want the first row as a duplicate (%q)", code, again, out)
	}
	if bad, code := node(t, env, "publish.mjs", "order.created", "bad", `[1]`); code != 2 || !strings.Contains(bad, "22023") || !strings.Contains(bad, "data must be a JSON object") {
		t.Fatalf("data that is not an object: exit %d\n%s", code, bad)
	}
	if unrouted, code := node(t, env, "publish.mjs", "invoice.paid", "k", `{}`); code != 2 || !strings.Contains(unrouted, "P0002") || !strings.Contains(unrouted, "no route matches event type invoice.paid") {
		t.Fatalf("an unrouted event: exit %d\n%s", code, unrouted)
	}
	if n := len(rcv.arrivals("order.created/node-rolled-back/orders")); n != 0 {
		t.Fatalf("the rolled-back event was delivered %d times", n)
	}
}
