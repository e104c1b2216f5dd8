package pubsub_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// binaryDelivers bounds the wait for `outboxd serve` to publish the
// backlog: the binary polls every 100ms, the rest is a loaded machine.
const binaryDelivers = 2 * time.Minute

// TestBinaryPublishesAsConfigured runs the real binary, as an operator
// does: `type: pubsub` in plugins.yaml, pointed at the fake with endpoint.
// `config show` prints the sink's options with credentials_json redacted,
// and `serve` publishes a backlog of interleaved ordering keys, each
// message once under its delivery id, each key in order.
// Mutation: leaving pubsub.Type out of sinks/builtin's broker list fails
// it (config show refuses the unknown type).
func TestBinaryPublishesAsConfigured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the outboxd binary")
	}
	t.Parallel()
	bin, err := proc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	sub := f.topic(t, "events")
	pool, ob := testdb.New(t)
	dir := t.TempDir()
	write := func(name, options string) string {
		path := filepath.Join(dir, name)
		config := "database: {schema: " + ob.Schema() + "}\nrelay: {poll_interval: 100ms}\nhttp: {listen: 127.0.0.1:0}\n" +
			"sinks:\n  events:\n    type: pubsub\n    options: " + options + "\n"
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	env := proc.Environ("DATABASE_URL=" + testdb.URL())

	const secret = "s3cret-key-material"
	shown := write("show.yaml", `{project: p1, topic: events, credentials_json: '{"type": "service_account", "private_key": "`+secret+`"}'}`)
	r, err := proc.Run(t.Context(), bin, env, nil, "--config", shown, "config", "show")
	if err != nil || r.Code != 0 {
		t.Fatalf("config show: %v, exit %d\n%s%s", err, r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout+r.Stderr, secret) || !strings.Contains(r.Stdout, "credentials_json") {
		t.Errorf("config show must list credentials_json redacted:\n%s", r.Stdout)
	}

	msgs := brokertest.Messages("events", "bin", 40, "customer-a", "customer-b", "customer-c")
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	srv := proc.Serve(t, bin, write("serve.yaml", "{project: "+project+", topic: events, endpoint: '"+f.srv.Addr+"'}"), env)
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("outboxd serve did not stop cleanly: %v\n%s", err, srv.Logs())
		}
	})
	var got []brokertest.Received
	testrelay.WaitFor(t, binaryDelivers, "the binary to publish every message", func() bool {
		got = sub.read(t)
		return len(got) >= len(msgs)
	})
	brokertest.CheckDelivered(t, msgs, got, true)
	brokertest.CheckOrder(t, got)
}
