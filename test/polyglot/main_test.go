// Package polyglot_test uses outboxd the way producers and receivers not
// written in Go do: the SQL enqueue() function from psql and from Node.js
// (npm's pg), and the webhook sink's signatures verified by npm's
// standardwebhooks, each against a real `outboxd serve`.
package polyglot_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// binary is the outboxd binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) { proc.MainWithBinary(m, &binary) }

// nodeExamples is the npm package of the Node.js examples, from this
// package's directory.
const nodeExamples = "../../examples/node"

// deliveryTimeout bounds waits for deliveries that must happen.
const deliveryTimeout = 30 * time.Second

var npmOnce sync.Once

// requireNodeExamples makes sure node runs and the examples' packages are
// installed (`npm ci`, once, when .ci/run has not already done it).
func requireNodeExamples(t *testing.T) {
	t.Helper()
	proc.RequireTool(t, "node")
	var npmErr error
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(nodeExamples, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		npm := proc.RequireTool(t, "npm")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = nodeExamples
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %w\n%s", nodeExamples, err, out)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
}

// outbox is one test's schema and configuration for `outboxd serve`.
type outbox struct {
	schema, config string
}

// newOutbox writes a configuration for a fresh schema (dropped when the test
// ends) with a poll interval of 10 s, so only a wake-up can deliver fast, and
// the given sinks block (entries indented by two spaces), then migrates.
func newOutbox(t *testing.T, sinks string) *outbox {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	o := &outbox{schema: "polyglot_" + hex.EncodeToString(suffix)}
	pool := testdb.Pool(t, 1)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+o.schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", o.schema, err)
		}
	})
	o.config = filepath.Join(t.TempDir(), "plugins.yaml")
	cfg := fmt.Sprintf("database: {url: %q, schema: %s}\nrelay: {poll_interval: 10s}\nhttp: {listen: 127.0.0.1:0}\nsinks:\n%s",
		testdb.URL(), o.schema, sinks)
	if err := os.WriteFile(o.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := proc.Run(t.Context(), binary, proc.Environ(), nil, "--config", o.config, "migrate"); err != nil || r.Code != 0 {
		t.Fatalf("migrate: %v %+v", err, r)
	}
	return o
}

// serve starts `outboxd serve` and waits until its relay LISTENs for
// wake-ups, so what the test measures afterwards is a woken delivery.
func (o *outbox) serve(t *testing.T) {
	t.Helper()
	srv := proc.Serve(t, binary, o.config, proc.Environ())
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("outboxd serve did not stop cleanly: %v\n%s", err, srv.Logs())
		}
	})
	pool := testdb.Pool(t, 1)
	// The listener LISTENs on the outbox's channel and its loops' own in
	// one statement; the loops register for wake-ups once it does.
	listen := fmt.Sprintf("LISTEN %q;%%", o.schema+"_outbox_wakeup")
	testrelay.WaitFor(t, deliveryTimeout, "the relay to LISTEN and register", func() bool {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1
			AND EXISTS (SELECT 1 FROM `+o.schema+`.waiters)`, listen).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// arrival is one request a receiver got.
type arrival struct {
	at     time.Time
	header http.Header
	body   string
}

// receiver is a webhook endpoint recording each request by webhook-id.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string][]arrival
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string][]arrival{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		// webhook-id is the delivery id, "<sink>/<dedup key>": keep the key.
		_, id, _ := strings.Cut(req.Header.Get("webhook-id"), "/")
		r.got[id] = append(r.got[id], arrival{time.Now(), req.Header, string(body)})
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// arrivals returns the requests received under id.
func (r *receiver) arrivals(id string) []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id]
}

// await waits for the first request under id and returns it.
func (r *receiver) await(t *testing.T, id string) arrival {
	t.Helper()
	testrelay.WaitFor(t, deliveryTimeout, "delivery of "+id, func() bool { return len(r.arrivals(id)) > 0 })
	return r.arrivals(id)[0]
}

// webhookSink is a sinks block entry for a webhook sink to url.
func webhookSink(name, url, secret string) string {
	return fmt.Sprintf("  %s:\n    type: webhook\n    options: {url: %q, secret: %q, allow_private: true}\n", name, url, secret)
}
