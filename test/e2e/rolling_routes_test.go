package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// bodyReceiver is a webhook endpoint that answers 503 (retry later) until
// opened, then records each delivery's body by webhook-id.
type bodyReceiver struct {
	*httptest.Server
	open   atomic.Bool
	mu     sync.Mutex
	bodies map[string][]string // webhook-id -> bodies accepted
}

func newBodyReceiver(t *testing.T) *bodyReceiver {
	r := &bodyReceiver{bodies: map[string][]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if !r.open.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		id := req.Header.Get("webhook-id")
		r.bodies[id] = append(r.bodies[id], string(body))
	}))
	t.Cleanup(r.Close)
	return r
}

// accepted returns every accepted body, by webhook-id.
func (r *bodyReceiver) accepted() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]string, len(r.bodies))
	for id, bs := range r.bodies {
		out[id] = append([]string(nil), bs...)
	}
	return out
}

// ordersRoutes is the routes block of the deploy: route orders to
// sink partner with the webhook body template body.
func ordersRoutes(body string) string {
	return fmt.Sprintf("routes:\n  orders:\n    events: [order.*]\n    to:\n      - sink: partner\n        template:\n          body: '%s'\n", body)
}

// A rolling deploy that changes route orders' template from
// {"order": "{{.data.order_id}}"} (v1) to {"order": "{{.data.order.id}}"}
// (v2): events published before and after `migrate` applies v2, a v1 relay
// still running next to a v2 relay, both delivering rows of both versions.
// Every row arrives once, rendered with the template it was published
// under, and none is dead-lettered. (On main, both v1 rows died at attempt
// 1 with `map has no entry for key "order"` on a v2 relay. Mutation:
// routing's compiledFor ignoring the row's RouteVersion fails this test:
// rows die on whichever relay has the other template.)
func TestRollingDeployChangingATemplate(t *testing.T) {
	t.Parallel()
	rcv := newBodyReceiver(t)
	partner := fmt.Sprintf("  partner:\n    type: webhook\n    max_attempts: 100\n    backoff: {initial: 100ms, max: 300ms}\n    options: {url: %q, secret: %q, allow_private: true}\n",
		rcv.URL, webhookSecret)
	const v1Body, v2Body = `{"order": "{{.data.order_id}}"}`, `{"order": "{{.data.order.id}}"}`
	v1 := newEnv(t, partner, ordersRoutes(v1Body))
	v2 := v1.withRoutes(t, ordersRoutes(v1Body), ordersRoutes(v2Body))

	v1.mustRun("migrate") // applies v1
	const n = 6
	want := map[string]string{} // event key -> body
	for i := range n {
		key := fmt.Sprintf("old-%d", i)
		v1.mustRun("publish", "--type", "order.created", "--key", key, "--data", fmt.Sprintf(`{"order_id": %q}`, key))
		want[key] = fmt.Sprintf(`{"order":"%s"}`, key)
	}
	v1Relay := v1.serve() // the old relay runs through the deploy
	v2.mustRun("migrate") // the deploy job applies v2
	for i := range n {
		key := fmt.Sprintf("new-%d", i)
		v2.mustRun("publish", "--type", "order.created", "--key", key, "--data", fmt.Sprintf(`{"order": {"id": %q}}`, key))
		want[key] = fmt.Sprintf(`{"order":"%s"}`, key)
	}
	v2Relay := v2.serve()
	rcv.open.Store(true)

	eventually(t, 60*time.Second, "every row sent or dead", func() bool {
		var done int
		err := v1.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+v1.schema+".messages_all WHERE status IN ('sent', 'dead')").Scan(&done)
		return err == nil && done == 2*n
	})
	var dead int
	if err := v1.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+v1.schema+".messages_all WHERE status = 'dead'").Scan(&dead); err != nil || dead != 0 {
		t.Errorf("%d rows dead-lettered (%v), want none\nv1 relay:\n%s\nv2 relay:\n%s", dead, err, v1Relay.Logs(), v2Relay.Logs())
	}
	got := rcv.accepted()
	if len(got) != 2*n {
		t.Errorf("the receiver got %d distinct messages, want %d: %v", len(got), 2*n, got)
	}
	var bodies, wanted []string
	for id, bs := range got {
		if len(bs) != 1 {
			t.Errorf("webhook-id %s arrived %d times: %q", id, len(bs), bs)
		}
		for _, b := range bs {
			bodies = append(bodies, strings.ReplaceAll(b, " ", ""))
		}
	}
	for _, b := range want {
		wanted = append(wanted, b)
	}
	slices.Sort(bodies)
	slices.Sort(wanted)
	if !slices.Equal(bodies, wanted) {
		t.Errorf("bodies delivered:\n%q\nwant each rendered with its version's template:\n%q", bodies, wanted)
	}
}

// withRoutes returns an env on the same schema whose configuration has
// the routes block to in place of from.
func (e *env) withRoutes(t *testing.T, from, to string) *env {
	t.Helper()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), from) {
		t.Fatalf("the configuration has no routes block %q", from)
	}
	other := *e
	other.config = filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(other.config, []byte(strings.Replace(string(cfg), from, to, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return &other
}
