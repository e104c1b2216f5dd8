// Package crashchild runs the child half of a crash test: the calling test
// binary again, with one test selected, that kills its own process with
// SIGKILL at the moment the test wants a relay to die. Run returns only
// once PostgreSQL has ended the child's sessions, so that what the child
// wrote is final when the test reads it.
package crashchild

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

const (
	// Timeout bounds the child: it must have killed itself by then.
	Timeout = time.Minute
	// sessionsEndTimeout bounds the wait for PostgreSQL to end the killed
	// child's sessions; sessionsPollInterval is how often Run looks.
	sessionsEndTimeout   = 30 * time.Second
	sessionsPollInterval = 10 * time.Millisecond
)

// children numbers this process's children, for their application names.
var children atomic.Int64

// Run runs childTest of the calling test binary in a child process with env
// added to this one's, and fails the test unless the child died by
// SIGKILL. The child's testdb connections carry an application_name of
// their own (through TEST_DATABASE_URL), and Run waits until PostgreSQL
// has none of them left.
func Run(t testing.TB, childTest string, env ...string) {
	t.Helper()
	name := fmt.Sprintf("outboxd-crash-child-%d-%d", os.Getpid(), children.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+childTest+"$", "-test.count=1")
	child.Env = append(append(os.Environ(), env...), "TEST_DATABASE_URL="+withApplicationName(testdb.URL(), name))
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child relay %s was not killed (err %v):\n%s", childTest, err, out)
	}
	waitSessionsEnded(t, name)
}

// withApplicationName returns the connection string dsn (a URL or
// key=value pairs) with application_name set to name.
func withApplicationName(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", name)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return strings.TrimSpace(dsn) + " application_name=" + name
}

// waitSessionsEnded waits until no database session called applicationName
// is left. A statement a killed process sent just before it died (its
// completer's write of sent rows) still runs to its end and commits; only
// then does the backend read the closed socket and exit. Reading rows
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
			t.Fatalf("waiting for the sessions of %s to end: %v", applicationName, err)
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
