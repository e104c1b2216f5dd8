package cmd

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestServeFailingEarlyLeaksNoPool: when serve gives up before its relay
// runs (here its HTTP port is taken), every connection pool it opened is
// closed. (Mutation: NewRelay opening a pool again fails this test.) On fb9f77d NewRelay opened the relay's own pool, which only
// Relay.Run closed, so this path leaked it (its health-check goroutine
// stayed behind).
func TestServeFailingEarlyLeaksNoPool(t *testing.T) {
	_, ob := testdb.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	config := filepath.Join(t.TempDir(), "plugins.yaml")
	yaml := fmt.Sprintf("database: {schema: %s}\nhttp: {listen: %q}\nsinks:\n  audit: {type: log}\n", ob.Schema(), taken.Addr().String())
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	before := poolGoroutines()
	var stderr bytes.Buffer
	env := map[string]string{"DATABASE_URL": testdb.URL()}
	code := execute(context.Background(), []string{"--config", config, "serve"}, streams{
		In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &stderr,
		Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok },
	})
	if code == 0 || !strings.Contains(stderr.String(), "address already in use") {
		t.Fatalf("serve with its port taken: exit %d, stderr:\n%s", code, stderr.String())
	}
	// Pools stop their background goroutines as they close; give them the
	// moment that takes, then none may be left.
	deadline := time.Now().Add(5 * time.Second)
	for poolGoroutines() > before && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling the runtime, not the relay: nothing to signal
	}
	if n := poolGoroutines(); n > before {
		t.Fatalf("%d pgxpool goroutines left behind by serve:\n%s", n-before, stacks())
	}
}

// poolGoroutines counts the goroutines running pgxpool code.
func poolGoroutines() int {
	return strings.Count(stacks(), "pgxpool.(*Pool)")
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
