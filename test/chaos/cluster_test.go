package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/outboxd/outboxd/internal/proc"
)

// sinkName is the webhook sink every chaos message goes to.
const sinkName = "hook"

// relayTuning is the relay part of the chaos configuration: a short lease
// so that killed relays' rows come back quickly, and a small concurrency so
// that the duplicate bound (kills x in-flight limit) is meaningful.
type relayTuning struct {
	lease       string
	concurrency int
	batchSize   int
}

// cluster is the set of `outboxd serve` processes of one chaos run.
type cluster struct {
	t      *testing.T
	bin    string
	dir    string
	config string
	env    []string
	token  string

	mu     sync.Mutex
	relays []*proc.Server
	past   []*proc.Server // killed or stopped, kept for their logs
	kills  int
}

// writeConfig writes plugins.yaml for the chaos run.
func writeConfig(t *testing.T, dir, dbURL, receiverURL, secret, token string, rt relayTuning) string {
	t.Helper()
	cfg := fmt.Sprintf(`database:
  url: %s
  schema: chaos
relay:
  batch_size: %d
  lease: %s
  poll_interval: 200ms
  concurrency: %d
http:
  listen: 127.0.0.1:0
  token: %s
sinks:
  %s:
    type: webhook
    max_attempts: 100
    backoff: {initial: 50ms, max: 500ms}
    options:
      url: %s
      secret: %s
      allow_private: true
      timeout: 1s
`, dbURL, rt.batchSize, rt.lease, rt.concurrency, token, sinkName, receiverURL, secret)
	path := filepath.Join(dir, "plugins.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *cluster) start(n int) {
	for range n {
		s := proc.Serve(c.t, c.bin, c.config, c.env)
		c.mu.Lock()
		c.relays = append(c.relays, s)
		c.mu.Unlock()
	}
}

// killOne SIGKILLs a random relay and starts its replacement.
func (c *cluster) killOne(rng *rand.Rand) {
	c.mu.Lock()
	i := rng.IntN(len(c.relays))
	victim := c.relays[i]
	c.mu.Unlock()
	victim.Kill()
	next := proc.Serve(c.t, c.bin, c.config, c.env)
	c.mu.Lock()
	c.relays[i] = next
	c.past = append(c.past, victim)
	c.kills++
	c.mu.Unlock()
}

// anyAddr returns the API address of a random live relay.
func (c *cluster) anyAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relays[rand.IntN(len(c.relays))].Addr()
}

// stopAll stops the live relays gracefully and reports any that did not
// exit cleanly.
func (c *cluster) stopAll() {
	c.mu.Lock()
	relays := c.relays
	c.relays = nil
	c.past = append(c.past, relays...)
	c.mu.Unlock()
	for _, s := range relays {
		if err := s.Stop(); err != nil {
			c.t.Errorf("relay %d did not stop cleanly: %v\n%s", s.Pid(), err, tail(s.Logs(), 40))
		}
	}
}

// logs returns every relay's log, live and past.
func (c *cluster) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, s := range append(append([]*proc.Server{}, c.past...), c.relays...) {
		fmt.Fprintf(&b, "=== relay pid %d\n%s", s.Pid(), s.Logs())
	}
	return b.String()
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}
