// Package events_test runs examples/events/plugins.yaml end to end, as a
// deployment does: `outboxd migrate` applies its routes, `outboxd serve`
// relays, and events are published through the CLI, the HTTP API and SQL
// (psql), to the fake Slack, a webhook receiver that checks signatures
// with the Standard Webhooks library, and Mailpit.
package events_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/outboxd/outboxd/internal/testkit/mailpit"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/email"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// binary is the outboxd binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) { proc.MainWithBinary(m, &binary) }

// deliveryTimeout bounds waits for deliveries that must happen.
const deliveryTimeout = 30 * time.Second

// webhookSecret signs the partner webhook's deliveries.
var webhookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("outboxd-events-signing-key-bytes"))

// opsChannel is the Slack channel the routes post to.
const opsChannel = "C0OPSCHAN1"

// mailDomain is the domain of the finance sink's sender, hence of its
// Message-IDs.
const mailDomain = "example.com"

// exampleConfig is the configuration these tests run, from this
// package's directory.
const exampleConfig = "../../examples/events/plugins.yaml"

// deployment is one test's outbox schema, configuration and destinations.
type deployment struct {
	t       *testing.T
	config  string
	env     []string
	schema  string
	slack   *fakeslack.Server
	partner *verifyingReceiver
	mail    *mailpit.Server
	server  *proc.Server
}

// deploy runs the example's configuration in a fresh schema (dropped when
// the test ends), its variables pointing at a fake Slack, a verifying
// webhook receiver and a Mailpit of the test's own.
func deploy(t *testing.T) *deployment {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	d := &deployment{t: t, config: exampleConfig, schema: "events_" + hex.EncodeToString(suffix),
		slack: fakeslack.New(), partner: newVerifyingReceiver(t), mail: mailpit.Start(t)}
	t.Cleanup(d.slack.Close)
	pool := testdb.Pool(t, 1)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+d.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", d.schema, err)
		}
	})
	d.env = proc.Environ(
		"DATABASE_URL="+testdb.URL(),
		"OUTBOXD_DATABASE_SCHEMA="+d.schema,
		"OUTBOXD_HTTP_LISTEN=127.0.0.1:0",
		"OUTBOXD_RELAY_POLL_INTERVAL=100ms",
		"SLACK_BOT_TOKEN="+fakeslack.Token,
		"SLACK_CHANNEL="+opsChannel,
		"SLACK_API_URL="+d.slack.APIURL(),
		"PARTNER_WEBHOOK_URL="+d.partner.URL,
		"PARTNER_WEBHOOK_SECRET="+webhookSecret,
		"PARTNER_ALLOW_PRIVATE=true",
		"SMTP_ADDR="+d.mail.SMTP,
		"SMTP_TLS=none",
	)
	return d
}

// outboxd runs the binary to completion.
func (d *deployment) outboxd(stdin io.Reader, args ...string) proc.Result {
	d.t.Helper()
	r, err := proc.Run(context.Background(), binary, d.env, stdin, append([]string{"--config", d.config}, args...)...)
	if err != nil {
		d.t.Fatal(err)
	}
	return r
}

// mustOutboxd runs the binary and fails the test unless it exits 0.
func (d *deployment) mustOutboxd(args ...string) string {
	d.t.Helper()
	r := d.outboxd(nil, args...)
	if r.Code != 0 {
		d.t.Fatalf("outboxd %v exited %d\nstdout: %s\nstderr: %s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// serve starts `outboxd serve`, stopped with SIGTERM when the test ends.
func (d *deployment) serve() {
	d.t.Helper()
	d.server = proc.Serve(d.t, binary, d.config, d.env)
	d.t.Cleanup(func() {
		if err := d.server.Stop(); err != nil {
			d.t.Errorf("outboxd serve did not stop cleanly: %v\n%s", err, d.server.Logs())
		}
	})
}

// psql runs script through psql against the test database.
func (d *deployment) psql(script string) string {
	d.t.Helper()
	cmd := exec.Command(proc.RequireTool(d.t, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", testdb.URL())
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		d.t.Fatalf("psql: %v\n%s", err, out)
	}
	return string(out)
}

// postEvent posts an event to the HTTP API and returns the status and the
// decoded answer.
func (d *deployment) postEvent(body string) (int, []published) {
	d.t.Helper()
	resp, err := http.Post("http://"+d.server.Addr()+"/v1/events", "application/json", strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct{ Messages []published }
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		d.t.Fatalf("POST /v1/events answered %s: %v", resp.Status, err)
	}
	return resp.StatusCode, answer.Messages
}

// published is one row of a POST /v1/events answer.
type published struct {
	Sink    string `json:"sink"`
	ID      int64  `json:"id"`
	Created bool   `json:"created"`
}

// verifyingReceiver is a webhook endpoint that accepts only deliveries
// whose signature the Standard Webhooks library verifies, and records
// them by webhook-id.
type verifyingReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      map[string][]string // bodies by webhook-id
	rejected int
}

func newVerifyingReceiver(t *testing.T) *verifyingReceiver {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(webhookSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &verifyingReceiver{got: map[string][]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := wh.Verify(body, req.Header); err != nil {
			r.rejected++
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		// webhook-id is the delivery id, "<sink>/<dedup key>": keep the key.
		_, id, _ := strings.Cut(req.Header.Get("webhook-id"), "/")
		r.got[id] = append(r.got[id], string(body))
	}))
	t.Cleanup(r.Close)
	return r
}

// bodies returns the verified deliveries of id.
func (r *verifyingReceiver) bodies(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id]
}

// ids counts the distinct webhook-ids received.
func (r *verifyingReceiver) ids() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// orderData is order n's data.
func orderData(n int) string {
	return fmt.Sprintf(`{"id": %d, "total": "12.50", "currency": "EUR", "customer": "Ann <ann@example.com>"}`, n)
}

// awaitOrder waits until order n reached Slack, the partner and finance,
// and returns its Slack post, its webhook body and its mail.
func (d *deployment) awaitOrder(n int) (fakeslack.Message, string, mailpit.Message) {
	d.t.Helper()
	dedupKey := fmt.Sprintf("order.created/order-%d/orders", n)
	text := fmt.Sprintf("New order %d: 12.50 EUR from Ann &lt;ann@example.com&gt;", n)
	var post fakeslack.Message
	testrelay.WaitFor(d.t, deliveryTimeout, "order on Slack", func() bool {
		for _, p := range d.slack.Posts() {
			if p.Text == text {
				post = p
				return true
			}
		}
		return false
	})
	testrelay.WaitFor(d.t, deliveryTimeout, "order at the partner", func() bool { return len(d.partner.bodies(dedupKey)) > 0 })
	mail := d.mail.WaitMessages(d.t, strings.Trim(email.MessageID("finance", dedupKey, mailDomain), "<>"), 1, deliveryTimeout)
	return post, d.partner.bodies(dedupKey)[0], mail[0]
}

// One publish of order.created reaches Slack as the rendered text, the
// partner as the signed Standard Webhooks envelope and finance as a mail
// with the rendered subject. Publishing it again, through the CLI or the
// HTTP API, creates nothing; a psql transaction that publishes and rolls
// back delivers nothing.
// (Mutation: publish_batch giving a repeated (type, key) a fresh dedup key
// fails this test: publishing again prints created rows, 4 posts each.)
func TestOrderCreatedReachesSlackWebhookAndEmailOnce(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	if out := d.mustOutboxd("migrate"); !strings.Contains(out, "routes applied: version") {
		t.Fatalf("migrate did not apply the routes:\n%s", out)
	}
	d.serve()

	out := d.mustOutboxd("publish", "--type", "order.created", "--key", "order-42", "--data", orderData(42))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "created ops-slack ") || !strings.HasPrefix(lines[1], "created partner ") || !strings.HasPrefix(lines[2], "created finance ") {
		t.Fatalf("publish printed %q, want a created line per target", out)
	}
	post, body, mail := d.awaitOrder(42)
	if post.Channel != opsChannel {
		t.Errorf("posted to %s, want %s", post.Channel, opsChannel)
	}
	var envelope struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &envelope); err != nil || envelope.Type != "order.created" ||
		time.Since(envelope.Timestamp) > time.Minute || !sameJSON(envelope.Data, orderData(42)) {
		t.Errorf("webhook body %s (%v), want the Standard Webhooks envelope of the event", body, err)
	}
	if mail.Subject != "Order 42 (12.50 EUR)" || !strings.Contains(mail.Text, "Order 42 from Ann <ann@example.com> was placed on ") ||
		!strings.Contains(mail.HTML, "Order <b>42</b> from Ann &lt;ann@example.com&gt;") {
		t.Errorf("mail %q / %q / %q, want the rendered subject, text and escaped html", mail.Subject, mail.Text, mail.HTML)
	}

	again := d.mustOutboxd("publish", "--type", "order.created", "--key", "order-42", "--data", orderData(42))
	if want := strings.ReplaceAll(out, "created", "duplicate"); again != want {
		t.Errorf("publishing again printed %q, want %q", again, want)
	}
	status, rows := d.postEvent(`{"type": "order.created", "key": "order-42", "data": ` + orderData(42) + `}`)
	if status != http.StatusOK || len(rows) != 3 || rows[0].Created || rows[1].Sink != "partner" {
		t.Errorf("POST /v1/events of the same event: %d %+v, want 200 and three existing rows", status, rows)
	}

	d.psql(fmt.Sprintf(`BEGIN;
SELECT * FROM %s.publish('order.created', 'order-43', '%s');
ROLLBACK;`, d.schema, orderData(43)))
	// Published after the rolled-back one: once it is delivered
	// everywhere, the other would have been too.
	status, rows = d.postEvent(`{"type": "order.created", "key": "order-44", "data": ` + orderData(44) + `}`)
	if status != http.StatusCreated || len(rows) != 3 || !rows[2].Created {
		t.Fatalf("POST /v1/events: %d %+v, want 201 and three new rows", status, rows)
	}
	d.awaitOrder(44)
	if n, ids, mails := len(d.slack.Posts()), d.partner.ids(), len(d.mail.All(t)); n != 2 || ids != 2 || mails != 2 {
		t.Errorf("Slack posts %d, webhook ids %d, mails %d: want 2 of each (orders 42 and 44, nothing twice, nothing rolled back)", n, ids, mails)
	}
	if d.partner.rejected > 0 {
		t.Errorf("%d webhook deliveries failed signature verification", d.partner.rejected)
	}
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// Events of one thread_key, published through the CLI, the HTTP API and
// SQL, become one Slack conversation: the first a message, the others
// replies carrying its ts as thread_ts, the first edited when resolved.
// (Mutation: the Slack sink ignoring update_root fails this test: the first
// message is never edited.)
func TestThreadRepliesCarryTheRootsThreadTS(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	d.mustOutboxd("migrate")
	d.serve()
	d.mustOutboxd("publish", "--type", "incident.opened", "--key", "inc-7-opened", "--thread-key", "inc-7",
		"--data", `{"title": "DB down", "status": "investigating"}`)
	if status, _ := d.postEvent(`{"type": "incident.updated", "key": "inc-7-update", "thread_key": "inc-7", "data": {"title": "DB down", "status": "failing over"}}`); status != http.StatusCreated {
		t.Fatalf("POST /v1/events answered %d", status)
	}
	d.psql(fmt.Sprintf(`SELECT * FROM %s.publish('incident.resolved', 'inc-7-resolved', '{"title": "DB down"}', thread_key => 'inc-7');`, d.schema))
	var posts []fakeslack.Message
	testrelay.WaitFor(t, deliveryTimeout, "three posts, the first edited", func() bool {
		posts = d.slack.Posts()
		return len(posts) == 3 && posts[0].Updates == 1
	})
	root := posts[0]
	if root.ThreadTS != "" || root.Text != ":white_check_mark: DB down: resolved" || root.Blocks != nil {
		t.Errorf("first message %+v, want a top-level message edited to the resolution", root)
	}
	for i, want := range []string{":rotating_light: DB down: failing over", ":white_check_mark: DB down: resolved"} {
		if reply := posts[i+1]; reply.ThreadTS != root.TS || reply.Text != want {
			t.Errorf("reply %d: %q in thread %q, want %q in %q", i, reply.Text, reply.ThreadTS, want, root.TS)
		}
	}
}

// A template mistake fails at load, naming key, route, sink and line; a
// template that fails for one event at delivery dead-letters that row with
// the template's message and delivers the others.
// (Mutations: compileRoutes dropping its problems fails this test: config
// check, migrate and routes apply exit 0; a render error at delivery not
// marked permanent fails it: order-1's rows are retried, never dead.)
func TestTemplateErrorsAtLoadAndAtDelivery(t *testing.T) {
	t.Parallel()
	typo := deploy(t)
	typo.config = filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(typo.config, []byte(`sinks:
  ops-slack:
    type: slack
    options: {token: xoxb-test, channel: C0OPSCHAN1}
routes:
  orders:
    events: [order.*]
    to:
      - sink: ops-slack
        template:
          text: |
            New order {{.data.id}}
            {{jsn .data}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"config", "check"}, {"migrate"}, {"routes", "apply"}} {
		r := typo.outboxd(nil, args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "routes.orders.to[0].template.text") ||
			!strings.Contains(r.Stderr, `route orders, sink ops-slack: template: text:2: function "jsn" not defined`) {
			t.Errorf("outboxd %v: exit %d, stderr:\n%s\nwant exit 2 naming the key, route, sink and line", args, r.Code, r.Stderr)
		}
	}

	d := deploy(t)
	d.mustOutboxd("migrate")
	d.serve()
	// No total: Slack's and finance's templates cannot render it; the
	// partner's envelope needs none.
	d.mustOutboxd("publish", "--type", "order.created", "--key", "order-1", "--data", `{"id": 1}`)
	d.mustOutboxd("publish", "--type", "order.created", "--key", "order-2", "--data", orderData(2))
	d.awaitOrder(2)
	testrelay.WaitFor(t, deliveryTimeout, "order-1 delivered to the partner", func() bool { return len(d.partner.bodies("order.created/order-1/orders")) == 1 })
	pool := testdb.Pool(t, 1)
	testrelay.WaitFor(t, deliveryTimeout, "order-1's Slack and mail rows dead", func() bool {
		var dead int
		err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+d.schema+".messages_all WHERE dedup_key = 'order.created/order-1/orders' AND status = 'dead' AND attempts = 1").Scan(&dead)
		return err == nil && dead == 2
	})
	out := d.mustOutboxd("dlq", "list")
	if !strings.Contains(out, `route orders, sink ops-slack: template: text:1:`) || !strings.Contains(out, `map has no entry for key \"total\"`) &&
		!strings.Contains(out, `map has no entry for key "total"`) {
		t.Errorf("dlq list does not show the template's message:\n%s", out)
	}
}

// `outboxd publish --file` checks every line with the database before it
// publishes any: a bad line or an unrouted event exits 2 naming its line
// and stores nothing; a good file prints one line per row. The HTTP API
// answers a refused event with 422 and publish()'s reason.
func TestPublishFileAndRefusals(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	d.mustOutboxd("migrate")
	d.serve()
	good := `{"type": "order.created", "key": "order-1", "data": ` + orderData(1) + `}
{"type": "incident.opened", "key": "f-2", "thread_key": "inc-9", "data": {"title": "Disk full", "status": "investigating"}}
`
	for _, c := range []struct{ file, want string }{
		{good + `{"type": "order.created", "key": "f-3"}` + "\n", "line 3: not an event"},
		{good + "\n" + `{"type": "invoice.paid", "key": "f-4", "data": {}}` + "\n", "events.jsonl line 4: outbox: event 3: no route matches event type invoice.paid"},
		{good + `{"type": "order..created", "key": "f-5", "data": {}}` + "\n", `line 3: outbox: invalid event: event 3: type "order..created"`},
	} {
		file := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(file, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := d.outboxd(nil, "publish", "--file", file); r.Code != 2 || !strings.Contains(r.Stderr, c.want) || r.Stdout != "" {
			t.Errorf("publish --file: exit %d\nstdout: %s\nstderr: %s\nwant exit 2 saying %q and nothing published", r.Code, r.Stdout, r.Stderr, c.want)
		}
	}
	if n := len(d.slack.Posts()); n != 0 {
		t.Fatalf("%d posts after refused files", n)
	}
	r := d.outboxd(strings.NewReader(good), "publish", "--file", "-")
	if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); r.Code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[3], "created ops-slack ") {
		t.Fatalf("publish --file -: exit %d\n%s%s\nwant four created lines", r.Code, r.Stdout, r.Stderr)
	}
	d.awaitOrder(1)

	status, body := d.postRaw(`{"type": "invoice.paid", "key": "h-1", "data": {}}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "no route matches event type invoice.paid") {
		t.Errorf("POST /v1/events of an unrouted event: %d %s", status, body)
	}
	status, body = d.postRaw(`{"type": "order.created", "key": "h-2"}`)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "data: is required") {
		t.Errorf("POST /v1/events without data: %d %s", status, body)
	}
}

// postRaw posts body to /v1/events and returns the status and the answer.
func (d *deployment) postRaw(body string) (int, string) {
	d.t.Helper()
	resp, err := http.Post("http://"+d.server.Addr()+"/v1/events", "application/json", strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// A serve that finds no routes applied (started without migrate applying
// them) applies its own, so that publishing works.
func TestServeAppliesItsRoutesWhenNoneAre(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	d.mustOutboxd("migrate")
	d.psql(fmt.Sprintf(`UPDATE %s.routes_active SET version = NULL;`, d.schema))
	if r := d.outboxd(nil, "publish", "--type", "order.created", "--key", "order-5", "--data", orderData(5)); r.Code != 2 || !strings.Contains(r.Stderr, "no routes are applied") {
		t.Fatalf("publish without routes: exit %d\n%s", r.Code, r.Stderr)
	}
	d.serve()
	testrelay.WaitFor(t, deliveryTimeout, "serve to apply its routes", func() bool {
		return strings.Contains(d.server.Logs(), "applied this configuration's routes: none were applied yet")
	})
	d.mustOutboxd("publish", "--type", "order.created", "--key", "order-5", "--data", orderData(5))
	d.awaitOrder(5)
}
