package destinations_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// deliveryTimeout bounds waits for deliveries that must happen.
const deliveryTimeout = 30 * time.Second

// examplesDir is the npm package holding standardwebhooks.
const examplesDir = "../../examples/node"

// request is one request a receiver got, when, and whether it was
// answered 503.
type request struct {
	path   string
	header http.Header
	body   string
	at     time.Time
	dead   bool
}

// receiver records every request, by path: one path per tenant. A path
// in dead answers 503, as an endpoint that is down.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []request
	dead map[string]bool
}

func newReceiver(t *testing.T, dead ...string) *receiver {
	r := &receiver{dead: map[string]bool{}}
	for _, d := range dead {
		r.dead[d] = true
	}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		dead := r.dead[req.URL.Path]
		r.got = append(r.got, request{req.URL.Path, req.Header.Clone(), string(body), time.Now(), dead})
		r.mu.Unlock()
		if dead {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

// at returns the requests to path, each event's data.order once (the
// first request).
func (r *receiver) at(path string) map[string]request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]request{}
	for _, q := range r.got {
		if q.path != path {
			continue
		}
		var ev struct {
			Data struct {
				Order string `json:"order"`
			} `json:"data"`
		}
		_ = json.Unmarshal([]byte(q.body), &ev)
		if _, seen := out[ev.Data.Order]; !seen {
			out[ev.Data.Order] = q
		}
	}
	return out
}

// count is how many requests reached path.
func (r *receiver) count(path string) int { return len(r.at(path)) }

// setDead makes path answer 503 (dead) or 204.
func (r *receiver) setDead(path string, dead bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dead[path] = dead
}

// times returns when each request to path arrived, in order.
func (r *receiver) times(path string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Time
	for _, q := range r.got {
		if q.path == path {
			out = append(out, q.at)
		}
	}
	return out
}

// outbox is a served outbox with a destinations sink "customers" whose
// route sends order.* and invoice.* to the tenant in .data.account_id.
type outbox struct {
	schema string
	pool   *pgxpool.Pool
	srv    *proc.Server
	api    string
	config string
	env    []string
}

// setup is what a test adds to the outbox's configuration.
type setup struct {
	// poll is relay.poll_interval ("" for 10s).
	poll string
	// options are more options of the customers sink, YAML flow entries
	// ("auto_disable_after: 3s").
	options string
	// sinks and routes are more sinks and routes, YAML lines indented to
	// go under sinks: and routes:.
	sinks, routes string
	// strict leaves allow_private out of the customers sink's options,
	// so that the destinations' network policy is the default.
	strict bool
	// env are more environment variables of the outboxd processes,
	// NAME=VALUE.
	env []string
	// top is more top-level blocks of plugins.yaml, YAML lines.
	top string
}

func serve(t *testing.T, with setup) *outbox {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	o := &outbox{schema: "dst_" + hex.EncodeToString(suffix), pool: testdb.Pool(t, 2)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := o.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+o.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", o.schema, err)
		}
	})
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	if with.poll == "" {
		with.poll = "10s"
	}
	private := "allow_private: true"
	if with.strict {
		private = ""
	}
	if with.options != "" && !with.strict {
		with.options = ", " + with.options
	}
	cfg := fmt.Sprintf(`database: {url: %q, schema: %s}
relay: {poll_interval: %s}
http: {listen: 127.0.0.1:0}
sinks:
  customers:
    type: destinations
    options: {%s%s}
    max_attempts: 100
%sroutes:
  billing:
    events: ["order.*", "invoice.*"]
    to:
      - {sink: customers, tenant: "{{.data.account_id}}"}
%s%s`, testdb.URL(), o.schema, with.poll, private, with.options, with.sinks, with.routes, with.top)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := destinations.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	o.config, o.env = config, proc.Environ(append([]string{destinations.EnvSecretsKey + "=" + key}, with.env...)...)
	o.run(t, "migrate")
	o.srv = o.serveAnother(t)
	o.api = "http://" + o.srv.Addr()
	return o
}

// serveAnother starts one more `outboxd serve` of the outbox: another
// relay of its cluster.
func (o *outbox) serveAnother(t *testing.T) *proc.Server {
	t.Helper()
	srv := proc.Serve(t, binary, o.config, o.env)
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("outboxd serve did not stop cleanly: %v\n%s", err, srv.Logs())
		}
	})
	return srv
}

// run runs an outboxd command on the outbox's configuration and returns
// its output; it fails the test unless the command succeeds.
func (o *outbox) run(t *testing.T, args ...string) string {
	t.Helper()
	r, err := proc.Run(t.Context(), binary, o.env, nil, append([]string{"--config", o.config}, args...)...)
	if err != nil || r.Code != 0 {
		t.Fatalf("outboxd %s: %v %+v", strings.Join(args, " "), err, r)
	}
	return r.Stdout
}

// call sends a JSON request to the API and decodes its answer into out.
func (o *outbox) call(t *testing.T, method, path string, body any, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, o.api+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// create makes a destination of tenant at the receiver's /tenant.
func (o *outbox) create(t *testing.T, r *receiver, tenant string, events ...string) destinations.Created {
	t.Helper()
	var c destinations.Created
	o.call(t, http.MethodPost, "/v1/tenants/"+tenant+"/destinations", map[string]any{"url": r.URL + "/" + tenant, "events": events}, &c)
	return c
}

// publishSQL publishes events in one transaction, committed or not.
func (o *outbox) publishSQL(t *testing.T, commit bool, events ...[3]string) {
	t.Helper()
	tx, err := o.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(t.Context()))
	for _, e := range events {
		data := fmt.Sprintf(`{"account_id": %q, "order": %q}`, e[1], e[2])
		if _, err := tx.Exec(t.Context(), `SELECT * FROM `+o.schema+`.publish($1, $2, $3::jsonb)`, e[0], e[2], data); err != nil {
			t.Fatal(err)
		}
	}
	if commit {
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// publishHTTP publishes one event through POST /v1/events.
func (o *outbox) publishHTTP(t *testing.T, typ, tenant, order string) {
	t.Helper()
	o.call(t, http.MethodPost, "/v1/events", map[string]any{"type": typ, "key": order, "data": map[string]string{"account_id": tenant, "order": order}}, nil)
}

// verify checks each request's signatures with standardwebhooks, once
// per secret, and returns per request which secrets verified.
func verify(t *testing.T, secrets []string, reqs ...request) [][]bool {
	t.Helper()
	node := proc.RequireTool(t, "node")
	if _, err := os.Stat(filepath.Join(examplesDir, "node_modules", "standardwebhooks")); err != nil {
		cmd := exec.Command(proc.RequireTool(t, "npm"), "ci", "--no-audit", "--no-fund")
		cmd.Dir = examplesDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	var in bytes.Buffer
	for _, r := range reqs {
		h := map[string]string{}
		for k := range r.header {
			h[strings.ToLower(k)] = r.header.Get(k)
		}
		line, _ := json.Marshal(map[string]any{"secrets": secrets, "headers": h, "body": r.body})
		in.Write(append(line, '\n'))
	}
	abs, _ := filepath.Abs(examplesDir)
	cmd := exec.Command(node, "testdata/verify.mjs")
	cmd.Env = append(os.Environ(), "EXAMPLES_DIR="+abs)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("verify.mjs: %v", err)
	}
	var results [][]bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var v struct{ Verified []bool }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		results = append(results, v.Verified)
	}
	return results
}

// TestTenantsReceiveTheirSignedEvents runs the whole path with a relay
// already running: destinations created through the API for three
// tenants get their first events without a restart; events published by
// SQL in transactions (one rolled back) and by HTTP reach exactly the
// tenant's subscribed destinations, signed so that standardwebhooks
// verifies them with the destination's own secret and not another's; a
// rotation with an overlap signs with both secrets, each verifying; a
// disabled destination's rows wait and arrive once it is enabled; and
// an endpoint answering 503 to every request does not hold up another
// tenant's delivery.
//
// The answer to a publish for a tenant without a matching destination
// says so, by HTTP and by the CLI; GET .../deliveries lists a
// destination's recent rows with their failed attempts.
//
// Mutations checked: postEvent not copying core.Published.FanOut into
// its messages drops the answer's note; printPublished ignoring FanOut
// drops the CLI's; making destination_deliveries match other destinations' rows
// lists rows that are not initech's; making the sink sign with the first secret only
// (webhook.Post given e.Secrets[:1]) fails the rotation's second
// verification; making Directory.Run return at once and Directory.Find
// skip its refresh on a miss leaves destinations created while the relay
// runs unknown (their events are dead-lettered); making destination_rows() ignore
// d.enabled and the sink ignore Live.Enabled (either alone still holds
// the row back) delivers the disabled destination's event before
// enabling; making RateKey name one key for every destination
// holds acme's events behind initech's failures (its breaker and backoff).
func TestTenantsReceiveTheirSignedEvents(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "/initech")
	o := serve(t, setup{})
	acme := o.create(t, rcv, "acme", "order.*")
	globex := o.create(t, rcv, "globex")
	initech := o.create(t, rcv, "initech")

	// initech's endpoint is down: its rows fail and back off first.
	for i := range 20 {
		o.publishSQL(t, true, [3]string{"order.created", "initech", fmt.Sprintf("i%d", i)})
	}
	o.publishSQL(t, true, [3]string{"order.created", "acme", "a1"}, [3]string{"invoice.paid", "acme", "a-inv"}, [3]string{"invoice.paid", "globex", "g1"})
	o.publishSQL(t, false, [3]string{"order.created", "acme", "rolled-back"})
	o.publishHTTP(t, "order.paid", "acme", "a2")
	var answer struct {
		Messages []struct {
			Tenant       string
			Destinations *int
			Note         string
		}
	}
	o.call(t, http.MethodPost, "/v1/events", map[string]any{"type": "order.created", "key": "n1", "data": map[string]string{"account_id": "nobody"}}, &answer)
	if m := answer.Messages; len(m) != 1 || m[0].Tenant != "nobody" || m[0].Destinations == nil || *m[0].Destinations != 0 || !strings.Contains(m[0].Note, "no matching destination") {
		t.Errorf("answer to an event for a tenant without destinations: %+v", m)
	}
	if out := o.run(t, "publish", "--type", "order.created", "--key", "n2", "--data", `{"account_id": "nobody"}`); !strings.Contains(out, "fan-out to tenant nobody: 0 rows (no matching destination") {
		t.Errorf("outboxd publish for a tenant without destinations says %q", out)
	}
	testrelay.WaitFor(t, deliveryTimeout, "acme's and globex's events", func() bool {
		return rcv.count("/acme") == 2 && rcv.count("/globex") == 1
	})
	if rcv.count("/initech") == 0 {
		t.Error("initech's endpoint got no attempt; the test shows nothing")
	}
	got := rcv.at("/acme")
	if _, ok := got["a-inv"]; ok {
		t.Error("acme got invoice.paid, which it does not subscribe to")
	}
	if _, ok := got["rolled-back"]; ok {
		t.Error("an event of a rolled-back transaction was delivered")
	}
	for order, req := range got {
		v := verify(t, []string{acme.Secret, globex.Secret}, req)
		if !v[0][0] || v[0][1] {
			t.Errorf("acme's %s: verified %v with [acme's, globex's] secret, want [true false]", order, v[0])
		}
	}

	var rotated struct{ Secret string }
	o.call(t, http.MethodPost, "/v1/tenants/acme/destinations/"+acme.ID+"/rotate-secret", map[string]string{"overlap": "24h"}, &rotated)
	o.publishSQL(t, true, [3]string{"order.shipped", "acme", "a3"})
	testrelay.WaitFor(t, deliveryTimeout, "acme's event after the rotation", func() bool { _, ok := rcv.at("/acme")["a3"]; return ok })
	req := rcv.at("/acme")["a3"]
	if n := strings.Count(req.header.Get("webhook-signature"), "v1,"); n != 2 {
		t.Errorf("after the rotation webhook-signature holds %d signatures, want 2", n)
	}
	if v := verify(t, []string{acme.Secret, rotated.Secret}, req)[0]; !v[0] || !v[1] {
		t.Errorf("during the overlap: verified %v with [old, new] secret, want both", v)
	}

	o.call(t, http.MethodPost, "/v1/tenants/globex/destinations/"+globex.ID+"/disable", map[string]string{"reason": "maintenance"}, nil)
	o.publishHTTP(t, "order.created", "globex", "g2")
	// A later event of another tenant arriving shows the relay past g2:
	// it claims in order, so a due g2 would have gone first.
	o.publishHTTP(t, "order.created", "acme", "a4")
	testrelay.WaitFor(t, deliveryTimeout, "acme's event published after globex's", func() bool { _, ok := rcv.at("/acme")["a4"]; return ok })
	var d destinations.Destination
	o.call(t, http.MethodGet, "/v1/tenants/globex/destinations/"+globex.ID, nil, &d)
	if _, ok := rcv.at("/globex")["g2"]; ok || d.Waiting == nil || *d.Waiting != 1 {
		t.Fatalf("while disabled: g2 delivered %v, waiting rows %v; want it waiting", ok, d.Waiting)
	}
	o.call(t, http.MethodPost, "/v1/tenants/globex/destinations/"+globex.ID+"/enable", nil, nil)
	testrelay.WaitFor(t, deliveryTimeout, "globex's waiting event after enabling", func() bool { _, ok := rcv.at("/globex")["g2"]; return ok })

	var page struct {
		Deliveries []struct {
			DedupKey       string            `json:"dedup_key"`
			Status         string            `json:"status"`
			FailedAttempts []json.RawMessage `json:"failed_attempts"`
		}
	}
	testrelay.WaitFor(t, deliveryTimeout, "initech's deliveries to show a failed attempt", func() bool {
		o.call(t, http.MethodGet, "/v1/tenants/initech/destinations/"+initech.ID+"/deliveries?limit=50", nil, &page)
		for _, d := range page.Deliveries {
			if len(d.FailedAttempts) > 0 {
				return true
			}
		}
		return false
	})
	if len(page.Deliveries) != 20 {
		t.Errorf("initech's deliveries list %d rows, want its 20", len(page.Deliveries))
	}
	// A tenant sees an event's dedup key as <type>/<key>: the route and the
	// destination id the fan-out appends are internal (destinations'
	// withoutRoute), so initech's 20 rows read order.created/i0..i19.
	for _, d := range page.Deliveries {
		if d.Status == "sent" || !strings.HasPrefix(d.DedupKey, "order.created/i") || strings.Count(d.DedupKey, "/") != 1 {
			t.Errorf("initech's delivery %+v", d)
		}
	}

	var sent int
	if err := o.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+o.schema+`.messages
		WHERE headers->>'outboxd-destination' IS NOT NULL AND status = 'sent' AND dedup_key LIKE 'order.created/i%'`).Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if sent != 0 {
		t.Errorf("%d of initech's rows were sent to an endpoint answering 503", sent)
	}
}
