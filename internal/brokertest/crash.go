package brokertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testsignal"
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

// crashTimeout bounds the child: it must have killed itself by then.
const crashTimeout = time.Minute

// sessionsEndTimeout bounds the wait for PostgreSQL to end the killed
// child's sessions; sessionsPollInterval is how often Crash looks.
const (
	sessionsEndTimeout   = 30 * time.Second
	sessionsPollInterval = 10 * time.Millisecond
)

// childApplicationName is the application_name of the child relay's
// sessions for the outbox in schema.
func childApplicationName(schema string) string { return "outboxd-crash-child-" + schema }

// Crash runs childTest of the calling test binary in a child process: a
// relay delivering ob's rows through the sink typ called sink, built from
// options, that SIGKILLs its own process as soon as after publishes were
// acknowledged. Those rows, and the publishes still in flight, are left in
// progress with the broker holding the messages. Crash fails the test
// unless the child died by SIGKILL, and returns once PostgreSQL has ended
// the child's sessions, so the rows it recorded sent stay as they are.
func Crash(t testing.TB, ob *core.Outbox, typ, sink string, options map[string]any, after int, childTest string) {
	t.Helper()
	opts, err := json.Marshal(options)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashTimeout)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+childTest+"$", "-test.count=1")
	child.Env = append(os.Environ(),
		childSchemaEnv+"="+ob.Schema(), childTypeEnv+"="+typ, childSinkEnv+"="+sink,
		childOptionsEnv+"="+string(opts), childAfterEnv+"="+strconv.Itoa(after),
		"TEST_DATABASE_URL="+testdb.URL())
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child relay was not killed (err %v):\n%s", err, out)
	}
	waitSessionsEnded(t, childApplicationName(ob.Schema()))
}

// waitSessionsEnded waits until no database session called applicationName
// is left. A statement a killed process sent just before it died (its
// completer's write of sent rows) still runs to its end and commits; only
// then does the backend read the closed socket and exit. Counting rows
// before that can miss a write that lands a moment later.
func waitSessionsEnded(t testing.TB, applicationName string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionsEndTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var left int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", applicationName).Scan(&left); err != nil {
			t.Fatalf("waiting for the sessions of %s to end (%d left): %v", applicationName, left, err)
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d sessions of %s still open after %s", left, applicationName, sessionsEndTimeout)
		case <-time.After(sessionsPollInterval):
		}
	}
}

// CrashChild is the body of the child test that Crash runs; it skips when
// a test run started it rather than Crash.
func CrashChild(t *testing.T) {
	schema := os.Getenv(childSchemaEnv)
	if schema == "" {
		t.Skip("run by a crash test in a child process")
	}
	ob, err := core.New(schema)
	if err != nil {
		t.Fatal(err)
	}
	var options map[string]any
	if err := json.Unmarshal([]byte(os.Getenv(childOptionsEnv)), &options); err != nil {
		t.Fatal(err)
	}
	after, err := strconv.Atoi(os.Getenv(childAfterEnv))
	if err != nil {
		t.Fatal(err)
	}
	name := os.Getenv(childSinkEnv)
	sink, err := registry.Build(os.Getenv(childTypeEnv), name, options)
	if err != nil {
		t.Fatal(err)
	}
	var acked atomic.Int64
	dieAfterPublishes := core.SinkFunc(func(ctx context.Context, d *core.Delivery) error {
		err := sink.Deliver(ctx, d)
		if err == nil && acked.Add(1) >= int64(after) {
			// The broker holds the message; the relay never records it.
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return err
	})
	signals := Relay(t, relayPool(t, childApplicationName(schema)), ob, nil, core.SinkConfig{Name: name, Sink: dieAfterPublishes})
	// The process dies inside the sink at its after-th publish, whose row
	// is never recorded sent: after rows recorded sent mean it survived,
	// and none within the limit that the publishes never happened.
	signals.Written.Wait(t, crashTimeout, fmt.Sprintf("%d publishes and the process killed", after), func(all []testsignal.Outcome) bool {
		return testsignal.CountWritten(all, string(core.StatusSent)) >= after
	})
	t.Fatalf("the relay recorded %d rows sent and was not killed", after)
}
