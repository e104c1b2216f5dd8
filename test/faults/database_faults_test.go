package faults_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/proc"
	"github.com/outboxd/outboxd/internal/testrelay"
	"github.com/outboxd/outboxd/test/internal/pgcluster"
)

// binary is the outboxd binary, built on first use.
var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func outboxdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "outboxd-faults-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary, buildErr = proc.Build(dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// hookReceiver counts deliveries per webhook-id and can hold requests
// until released.
type hookReceiver struct {
	mu      sync.Mutex
	seen    map[string]int
	arrived chan struct{}
	gate    chan struct{} // closed: requests pass; nil: no holding
}

func newHookReceiver(t *testing.T, hold bool) (*hookReceiver, string) {
	h := &hookReceiver{seen: map[string]int{}, arrived: make(chan struct{}, 1000)}
	if hold {
		h.gate = make(chan struct{})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.arrived <- struct{}{}
	if h.gate != nil {
		<-h.gate
	}
	h.mu.Lock()
	h.seen[r.Header.Get("webhook-id")]++
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookReceiver) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.seen))
	for k, v := range h.seen {
		out[k] = v
	}
	return out
}

// writeConfig writes a plugins.yaml with one webhook sink "hook" posting
// to url on the database at dbURL.
func writeConfig(t *testing.T, dbURL, url, lease string) string {
	t.Helper()
	cfg := fmt.Sprintf(`database: {url: %q, schema: faults}
relay: {lease: %s, poll_interval: 100ms}
http: {listen: 127.0.0.1:0}
sinks:
  hook:
    type: webhook
    backoff: {initial: 50ms, max: 200ms}
    options: {url: %q, allow_private: true, timeout: 2s}
`, dbURL, lease, url)
	path := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readyStatus(addr string) int {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func migrate(t *testing.T, bin, config string) {
	t.Helper()
	res, err := proc.Run(t.Context(), bin, proc.Environ(), nil, "--config", config, "migrate")
	if err != nil || res.Code != 0 {
		t.Fatalf("outboxd migrate: %v %+v", err, res)
	}
}

func enqueueCLI(t *testing.T, bin, config, key string) {
	t.Helper()
	res, err := proc.Run(t.Context(), bin, proc.Environ(), nil, "--config", config, "enqueue", "--sink", "hook", "--key", key, "--text", "hello")
	if err != nil || res.Code != 0 {
		t.Fatalf("outboxd enqueue: %v %+v", err, res)
	}
}

// waitAttempt matches serve's log line for a failed database check.
var waitAttempt = regexp.MustCompile(`"msg":"waiting for the database; retrying with backoff".*?"attempt":(\d+)`)

// TestDatabaseUnreachableAtStart: serve starts while PostgreSQL is down,
// keeps retrying with a growing backoff and says so in its log, answers
// /readyz with 503 meanwhile, and delivers once the database is up,
// without a restart.
func TestDatabaseUnreachableAtStart(t *testing.T) {
	t.Parallel()
	bin := outboxdBinary(t)
	pg := pgcluster.New(t) // initialised, not started
	hook, url := newHookReceiver(t, false)
	config := writeConfig(t, pg.URL(), url, "10s")
	srv := proc.Serve(t, bin, config, proc.Environ())

	testrelay.WaitFor(t, 15*time.Second, "three failed database checks are logged", func() bool {
		return len(waitAttempt.FindAllString(srv.Logs(), -1)) >= 3
	})
	if got := readyStatus(srv.Addr()); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the database is down: %d, want 503", got)
	}
	if err := checkBackoffGrows(srv.Logs()); err != nil {
		t.Error(err)
	}

	pg.Start()
	migrate(t, bin, config)
	testrelay.WaitFor(t, 40*time.Second, "/readyz turns 200 once the database is up", func() bool {
		return readyStatus(srv.Addr()) == http.StatusOK
	})
	enqueueCLI(t, bin, config, "after-start")
	testrelay.WaitFor(t, 20*time.Second, "the message is delivered", func() bool { return hook.counts()["after-start"] == 1 })
	if srv.Exited() {
		t.Fatalf("serve exited:\n%s", srv.Logs())
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("serve did not stop cleanly: %v\n%s", err, srv.Logs())
	}
}

// checkBackoffGrows checks from the JSON log's timestamps that the gaps
// between failed database checks grow.
func checkBackoffGrows(logs string) error {
	var times []time.Time
	for _, line := range strings.Split(logs, "\n") {
		if !waitAttempt.MatchString(line) {
			continue
		}
		m := regexp.MustCompile(`"time":"([^"]+)"`).FindStringSubmatch(line)
		if m == nil {
			return fmt.Errorf("log line without time: %s", line)
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			return err
		}
		times = append(times, ts)
	}
	if len(times) < 3 {
		return fmt.Errorf("only %d failed checks logged", len(times))
	}
	first, last := times[1].Sub(times[0]), times[len(times)-1].Sub(times[len(times)-2])
	if last <= first {
		return fmt.Errorf("backoff does not grow: first gap %s, last gap %s", first, last)
	}
	return nil
}

// TestDatabaseGoneMidRun: PostgreSQL stops while deliveries are in flight
// and comes back a few seconds later. The relay does not panic or exit,
// the terminal writes of the deliveries made while the database was away
// are retried rather than dropped (so nothing is delivered twice and no
// row stays in progress), and new messages flow again without a restart.
func TestDatabaseGoneMidRun(t *testing.T) {
	t.Parallel()
	bin := outboxdBinary(t)
	pg := pgcluster.Start(t)
	hook, url := newHookReceiver(t, true)
	config := writeConfig(t, pg.URL(), url, "20s")
	migrate(t, bin, config)
	srv := proc.Serve(t, bin, config, proc.Environ())

	const n = 5
	for i := range n {
		enqueueCLI(t, bin, config, fmt.Sprintf("before-%d", i))
	}
	for range n {
		select {
		case <-hook.arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("deliveries did not reach the receiver\n%s", srv.Logs())
		}
	}
	pg.Stop()
	close(hook.gate) // the deliveries succeed while the database is down
	testrelay.WaitFor(t, 10*time.Second, "the deliveries completed", func() bool { return len(hook.counts()) == n })
	time.Sleep(time.Second) // the terminal writes now fail and are retried
	pg.Start()

	pool := pg.Pool(2)
	testrelay.WaitFor(t, 30*time.Second, "the rows are marked sent", func() bool {
		var sent int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM faults.messages WHERE status = 'sent'`).Scan(&sent)
		return err == nil && sent == n
	})
	enqueueCLI(t, bin, config, "after")
	testrelay.WaitFor(t, 20*time.Second, "a message enqueued after the outage is delivered", func() bool {
		return hook.counts()["after"] == 1
	})
	for key, c := range hook.counts() {
		if c != 1 {
			t.Errorf("%s delivered %d times; the terminal write should have been retried, not dropped", key, c)
		}
	}
	if srv.Exited() || strings.Contains(srv.Logs(), "panic") {
		t.Fatalf("serve died or panicked:\n%s", srv.Logs())
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("serve did not stop cleanly: %v\n%s", err, srv.Logs())
	}
}
