package e2e_test

import (
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// gate is a TCP proxy to PostgreSQL that refuses service (closes every
// connection at once) until opened: a database that is down, then comes up.
type gate struct {
	ln   net.Listener
	open atomic.Bool
}

func newGate(t *testing.T, target string) *gate {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !g.open.Load() {
				_ = c.Close()
				continue
			}
			go g.pipe(c, target)
		}
	}()
	return g
}

func (g *gate) pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c) }()
	_, _ = io.Copy(c, up)
}

// TestServeWaitsForUnreachableDatabase: serve starts while PostgreSQL is
// unreachable, logs that it waits, fails /readyz, and starts delivering
// without a restart once the database answers.
func TestServeWaitsForUnreachableDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testdb.URL())
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, u.Host)
	e := newEnv(t, "  audit:\n    type: discard\n", "")
	e.mustRun("migrate")
	e.mustRun("enqueue", "--sink", "audit", "--key", "before-start", "--text", "hello")

	proxied := *u
	proxied.Host = g.ln.Addr().String()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(cfg), testdb.URL(), proxied.String(), 1)), 0o600); err != nil {
		t.Fatal(err)
	}

	srv := e.serve()
	eventually(t, 20*time.Second, "serve to log that it waits for the database", func() bool {
		return strings.Contains(srv.Logs(), "waiting for the database")
	})
	code, body := call(t, "GET", srv.url("/readyz"), "", "")
	if msg, _ := body["error"].(string); code != 503 || msg != "database unreachable" {
		t.Errorf("/readyz with the database down: %d %v", code, body)
	}
	if code, _ := call(t, "GET", srv.url("/healthz"), "", ""); code != 200 {
		t.Errorf("/healthz with the database down: %d", code)
	}

	g.open.Store(true)
	eventually(t, 60*time.Second, "/readyz to pass once the database is up", func() bool {
		code, _ := call(t, "GET", srv.url("/readyz"), "", "")
		return code == 200
	})
	eventually(t, 30*time.Second, "the waiting message to be delivered", func() bool {
		s := e.stats()["audit"]
		return s["pending"] == 0 && s["in_progress"] == 0
	})
	if !strings.Contains(srv.Logs(), "database ready") {
		t.Errorf("serve did not log that the database became ready:\n%s", srv.Logs())
	}
}
