package brokertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/crashchild"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/registry"
)

// What the crashing child reads from its environment.
const (
	childSchemaEnv  = "OUTBOXD_BROKER_CRASH_SCHEMA"
	childTypeEnv    = "OUTBOXD_BROKER_CRASH_TYPE"
	childSinkEnv    = "OUTBOXD_BROKER_CRASH_SINK"
	childOptionsEnv = "OUTBOXD_BROKER_CRASH_OPTIONS"
	childAfterEnv   = "OUTBOXD_BROKER_CRASH_AFTER"
)

// Crash runs childTest of the calling test binary in a child process: a
// relay delivering ob's rows through the sink typ called sink, built from
// options, that SIGKILLs its own process as soon as after publishes were
// acknowledged. Those rows, and the publishes still in flight, are left in
// progress with the broker holding the messages. See crashchild.Run for
// how the child is checked and waited for.
func Crash(t testing.TB, ob *testdb.Outbox, typ, sink string, options map[string]any, after int, childTest string) {
	t.Helper()
	opts, err := json.Marshal(options)
	if err != nil {
		t.Fatal(err)
	}
	crashchild.Run(t, childTest,
		childSchemaEnv+"="+ob.Schema(), childTypeEnv+"="+typ, childSinkEnv+"="+sink,
		childOptionsEnv+"="+string(opts), childAfterEnv+"="+strconv.Itoa(after))
}

// CrashChild is the body of the child test that Crash runs; it skips when
// a test run started it rather than Crash.
func CrashChild(t *testing.T) {
	schema := os.Getenv(childSchemaEnv)
	if schema == "" {
		t.Skip("run by a crash test in a child process")
	}
	ob := testdb.Open(t, schema)
	var options map[string]any
	if err := json.Unmarshal([]byte(os.Getenv(childOptionsEnv)), &options); err != nil {
		t.Fatal(err)
	}
	after, err := strconv.Atoi(os.Getenv(childAfterEnv))
	if err != nil {
		t.Fatal(err)
	}
	name := os.Getenv(childSinkEnv)
	built, err := registry.Build(os.Getenv(childTypeEnv), name, options, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	var acked atomic.Int64
	dieAfterPublishes := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		err := built.Deliver(ctx, d)
		if err == nil && acked.Add(1) >= int64(after) {
			// The broker holds the message; the relay never records it.
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return err
	})
	signals := Relay(t, testdb.Pool(t, relayPoolSize), ob, nil, relay.SinkConfig{Name: name, Sink: dieAfterPublishes})
	// The process dies inside the sink at its after-th publish, whose row
	// is never recorded sent: after rows recorded sent mean it survived,
	// and none within the limit that the publishes never happened.
	signals.Written.Wait(t, crashchild.Timeout, fmt.Sprintf("%d publishes and the process killed", after), func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, string(status.Sent)) >= after
	})
	t.Fatalf("the relay recorded %d rows sent and was not killed", after)
}
