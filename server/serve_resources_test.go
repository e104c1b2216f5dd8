package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestServeFailingEarlyLeaksNoPool: when serve gives up before its relay
// runs (here its HTTP port is taken), every connection pool it opened is
// closed. (Mutation: NewRelay opening a pool again fails this test.) On fb9f77d NewRelay opened the relay's own pool, which only
// Relay.Run closed, so this path leaked it (its health-check goroutine
// stayed behind).
func TestServeFailingEarlyLeaksNoPool(t *testing.T) {
	pool, ob := testdb.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	yaml := fmt.Sprintf("database: {schema: %s}\nhttp: {listen: %q}\nsinks:\n  audit: {type: log}\n", ob.Schema(), taken.Addr().String())
	cfg, err := config.Parse([]byte(yaml), "plugins.yaml", config.EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	before := poolGoroutines()
	log := slog.New(slog.DiscardHandler)
	err = Run(context.Background(), Options{Config: cfg, Pool: pool, Env: config.EnvMap(nil),
		Load:        func() (*config.Config, []string, error) { return cfg, nil, nil },
		Logger:      func() (*slog.Logger, error) { return log, nil },
		Scrubber:    func() secret.Scrubber { return secret.NewScrubber() },
		DatabaseURL: func(configured string) string { return configured },
	})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("serve with its port taken: %v", err)
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
