package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// sinkName is the webhook sink every chaos message goes to.
const sinkName = "hook"

// maxAttempts is the sink's max_attempts: low, so that doomed messages
// (which the receiver always fails) reach the dead-letter path within the
// run, yet high enough that the receiver's random failures (about 9% of
// requests) dead-letter a healthy message only about once in 100,000.
const maxAttempts = 5

// relayTuning is the relay part of the chaos configuration: a short lease
// so that killed relays' rows come back quickly, and a small concurrency so
// that few rows are in flight at each kill, which bounds the duplicates.
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
	config string // for the commands (migrate, enqueue)
	// relayConfig writes the configuration of the relay called label:
	// each relay posts to a URL of its own, so the receiver knows which
	// relay delivered what.
	relayConfig func(label string) string
	env         []string
	token       string

	mu       sync.Mutex
	relays   []*relay
	past     []*relay // killed or stopped, kept for their logs
	kills    int
	killedAt map[string]time.Time // relay label -> when it was killed
	serial   int                  // numbers the relays' labels
}

// relay is one `outboxd serve` of the cluster.
type relay struct {
	label string // the path it posts to
	*proc.Server
}

// writeConfig writes the chaos run's configuration as name.yaml.
func writeConfig(t *testing.T, dir, name, dbURL, receiverURL, secret, token string, rt relayTuning) string {
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
    max_attempts: %d
    backoff: {initial: 50ms, max: 500ms}
    options:
      url: %s
      secret: %s
      allow_private: true
      timeout: 1s
`, dbURL, rt.batchSize, rt.lease, rt.concurrency, token, sinkName, maxAttempts, receiverURL, secret)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *cluster) start(n int) {
	for range n {
		r := c.serve()
		c.mu.Lock()
		c.relays = append(c.relays, r)
		c.mu.Unlock()
	}
}

// serve starts a relay with a label of its own.
func (c *cluster) serve() *relay {
	c.mu.Lock()
	c.serial++
	label := fmt.Sprintf("relay-%d", c.serial)
	c.mu.Unlock()
	return &relay{label: label, Server: proc.Serve(c.t, c.bin, c.relayConfig(label), c.env)}
}

// killOne SIGKILLs a random relay, calls killed with its label (before
// its replacement starts) and starts the replacement.
func (c *cluster) killOne(rng *rand.Rand, killed func(label string)) {
	c.mu.Lock()
	i := rng.IntN(len(c.relays))
	victim := c.relays[i]
	c.mu.Unlock()
	victim.Kill()
	c.mu.Lock()
	if c.killedAt == nil {
		c.killedAt = map[string]time.Time{}
	}
	c.killedAt[victim.label] = time.Now()
	c.mu.Unlock()
	killed(victim.label)
	next := c.serve()
	c.mu.Lock()
	c.relays[i] = next
	c.past = append(c.past, victim)
	c.kills++
	c.mu.Unlock()
}

// killedWithin returns whether a request's relay was killed within d of
// sending it.
func (c *cluster) killedWithin(d time.Duration) func(arrival) bool {
	return func(a arrival) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		at, ok := c.killedAt[a.relay]
		return ok && at.Sub(a.at) < d
	}
}

// anyAddr returns the API address of a random live relay.
func (c *cluster) anyAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relays[rand.IntN(len(c.relays))].Addr()
}

// stopAll stops the live relays gracefully and reports any that did not
// exit cleanly (proc.StopAll).
func (c *cluster) stopAll() {
	c.mu.Lock()
	relays := c.relays
	c.relays = nil
	c.past = append(c.past, relays...)
	c.mu.Unlock()
	servers := make([]*proc.Server, len(relays))
	for i, r := range relays {
		servers[i] = r.Server
	}
	proc.StopAll(c.t, servers, nil)
}

// logs returns every relay's log, live and past.
func (c *cluster) logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range append(append([]*relay{}, c.past...), c.relays...) {
		fmt.Fprintf(&b, "=== %s, pid %d\n%s", r.label, r.Pid(), r.Logs())
	}
	return b.String()
}
