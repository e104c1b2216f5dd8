package faults_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
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
// until released. It runs in the test's process and signals each request
// on arrival and once answered, so tests wait on it rather than poll.
type hookReceiver struct {
	mu       sync.Mutex
	seen     map[string]int
	first    time.Time // when the first request was answered
	arrived  chan struct{}
	answered chan struct{}
	gate     chan struct{} // closed: requests pass; nil: no holding
}

// receiverBuffer is how many requests the receiver signals without a
// reader.
const receiverBuffer = 1000

func newHookReceiver(t *testing.T, hold bool) (*hookReceiver, string) {
	h := &hookReceiver{seen: map[string]int{}, arrived: make(chan struct{}, receiverBuffer), answered: make(chan struct{}, receiverBuffer)}
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
	// webhook-id is the delivery id, "<sink>/<dedup key>": count by key.
	_, key, _ := strings.Cut(r.Header.Get("webhook-id"), "/")
	h.seen[key]++
	if h.first.IsZero() {
		h.first = time.Now()
	}
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	h.answered <- struct{}{}
}

// await takes n signals from ch, failing t after timeout.
func await(t *testing.T, ch <-chan struct{}, n int, timeout time.Duration, what string, srv *proc.Server) {
	t.Helper()
	deadline := time.After(timeout)
	for i := range n {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("after %s: %d of %d %s\n%s", timeout, i, n, what, srv.Logs())
		}
	}
}

// firstAnswer is when the receiver answered its first request: no
// terminal write of an answered delivery starts before it.
func (h *hookReceiver) firstAnswer() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
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
    options: {url: %q, allow_private: true, timeout: 10s}
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
// without a restart. (Mutations: a constant backoff in waitForDatabase fails
// this test; so does a backoff giving up after 3 retries: serve exits; so
// does waiting for the database before listening: serve never listens.)
func TestDatabaseUnreachableAtStart(t *testing.T) {
	t.Parallel()
	bin := outboxdBinary(t)
	pg := pgcluster.New(t) // initialised, not started
	hook, url := newHookReceiver(t, false)
	config := writeConfig(t, pg.URL(), url, "10s")
	srv := proc.Serve(t, bin, config, proc.Environ())

	// Polls the log: serve is another process.
	// Five checks, 7.5 s with a backoff from 0.5 s: serve keeps waiting for
	// longer than a database restart takes.
	testrelay.WaitFor(t, 20*time.Second, "five failed database checks are logged", func() bool {
		return len(waitAttempt.FindAllString(srv.Logs(), -1)) >= 5 || srv.Exited()
	})
	if srv.Exited() {
		t.Fatalf("serve gave up waiting for the database:\n%s", srv.Logs())
	}
	if got := readyStatus(srv.Addr()); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the database is down: %d, want 503", got)
	}
	if err := checkBackoffGrows(srv.Logs()); err != nil {
		t.Error(err)
	}

	pg.Start()
	migrate(t, bin, config)
	// Polls /readyz: serve is another process.
	testrelay.WaitFor(t, 40*time.Second, "/readyz turns 200 once the database is up", func() bool {
		return readyStatus(srv.Addr()) == http.StatusOK
	})
	enqueueCLI(t, bin, config, "after-start")
	await(t, hook.answered, 1, 20*time.Second, "messages delivered", srv)
	if c := hook.counts()["after-start"]; c != 1 {
		t.Errorf("the message was delivered %d times, want once", c)
	}
	if srv.Exited() {
		t.Fatalf("serve exited:\n%s", srv.Logs())
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("serve did not stop cleanly: %v\n%s", err, srv.Logs())
	}
}

// checkBackoffGrows checks from the JSON log's timestamps that the gaps
// between failed database checks grow: an exponential backoff doubles
// them, so over three checks or more the last gap is at least
// minBackoffGrowth times the first, whatever the jitter.
// (Mutation: a constant backoff fails this check.)
func checkBackoffGrows(logs string) error {
	times := logTimes(logs, waitAttempt)
	if len(times) < 3 {
		return fmt.Errorf("only %d failed checks logged with their time", len(times))
	}
	first, last := times[1].Sub(times[0]), times[len(times)-1].Sub(times[len(times)-2])
	if float64(last) < minBackoffGrowth*float64(first) {
		return fmt.Errorf("backoff does not grow: first gap %s, last gap %s", first, last)
	}
	return nil
}

// minBackoffGrowth is how much the backoff must have grown between the
// first and the last gap of at least three checks: doubling with 10%
// jitter gives 1.6 or more, a constant backoff 1.25 at most.
const minBackoffGrowth = 1.5

// TestDatabaseGoneMidRun: PostgreSQL stops while deliveries are in flight;
// the receiver accepts them while the database is away, so their terminal
// writes fail. The relay never panics or exits and delivers new messages
// afterwards without a restart. Two outages, on one relay process each:
//   - within the lease, longer than the 5 s retry window: the terminal
//     writes are retried until the database is back, so every message is
//     delivered once and no row stays open;
//   - past the lease and past the 5 s retry window: the relay retries the
//     writes for at least 5 s, then leaves the rows to lease expiry rather
//     than dropping them, and once the database is back it delivers each
//     of them a second time and records it sent.
//
// (Mutations: a completer that gives up at once, writeDeadline returning
// time.Now(), fails both; minWindow = time.Second fails the second, whose
// writes then give up when the lease ends, less than 4 s after the
// deliveries; writeDeadline ignoring the leases fails the first: its
// writes give up after 5 s.)
func TestDatabaseGoneMidRun(t *testing.T) {
	t.Parallel()
	bin := outboxdBinary(t)
	pg := pgcluster.Start(t)
	t.Run("within the lease", func(t *testing.T) {
		const n = 5
		srv, hook, config := serveThroughOutage(t, bin, pg, "20s", "short", n)
		answered := hook.firstAnswer()
		// Polls the log: serve is another process. Failed claims, one a
		// second, show the relay meeting the outage; it lasts past the 5 s
		// retry window, so only retrying until the lease ends avoids a
		// second delivery.
		testrelay.WaitFor(t, 20*time.Second, "the relay to meet the outage past the retry window", func() bool {
			claims := logTimes(srv.Logs(), claimFailed)
			return len(claims) > 0 && claims[len(claims)-1].Sub(answered) > writeRetryWindow+time.Second
		})
		if gaveUp := logTimes(srv.Logs(), writesGivenUp); len(gaveUp) > 0 {
			t.Errorf("the terminal writes were given up %s after the deliveries, within their 20 s lease",
				gaveUp[0].Sub(answered).Round(time.Millisecond))
		}
		pg.Start()
		checkRows(t, pg, "short", n, 1)
		checkRecovered(t, bin, config, srv, hook, "short", 1)
	})
	t.Run("past the lease and the retry window", func(t *testing.T) {
		const n = 5
		srv, hook, config := serveThroughOutage(t, bin, pg, outageLease.String(), "long", n)
		answered := hook.firstAnswer()
		// Polls the log: serve is another process. PostgreSQL starts
		// again only once every row's write was given up: a write still
		// being retried when it is back lands, and its row is not
		// delivered again.
		var gaveUp []time.Time
		testrelay.WaitFor(t, 30*time.Second, "the relay to give every terminal write up", func() bool {
			gaveUp = logTimes(srv.Logs(), writesGivenUp)
			return rowsGivenUp(srv.Logs()) >= n
		})
		tried := gaveUp[0].Sub(answered)
		t.Logf("the terminal writes were retried for %s, then left to lease expiry", tried.Round(time.Millisecond))
		if tried < writeRetryWindow-clockSlack {
			t.Errorf("the terminal writes were given up %s after the deliveries, want at least %s", tried.Round(time.Millisecond), writeRetryWindow)
		}
		pg.Start()
		// The rows come back after their lease and are delivered again.
		await(t, hook.answered, n, 30*time.Second, "rows delivered again", srv)
		checkRows(t, pg, "long", n, 2)
		checkRecovered(t, bin, config, srv, hook, "long", 2)
	})
}

// writeRetryWindow is how long docs/guarantees.md says a failed terminal
// write is retried at least; outageLease is shorter, so the second outage
// outlasts both.
const (
	writeRetryWindow = 5 * time.Second
	outageLease      = 4 * time.Second
	// clockSlack allows for the log's timestamps being taken in another
	// process, a little after the receiver answered.
	clockSlack = 100 * time.Millisecond
)

// claimFailed matches the relay's log line for a claim that failed.
var claimFailed = regexp.MustCompile(`"msg":"outbox: claim failed"`)

// writesGivenUp matches the relay's log line for terminal writes it gave up.
var writesGivenUp = regexp.MustCompile(`"msg":"outbox: terminal writes? failed; the rows? will be delivered again`)

// givenUpRows finds how many rows a line of writesGivenUp gave up: a
// batch's line counts them, a single row's line has none.
var givenUpRows = regexp.MustCompile(`"rows":(\d+)`)

// rowsGivenUp counts the rows whose terminal writes the relay's log says
// it gave up.
func rowsGivenUp(logs string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if !writesGivenUp.MatchString(line) {
			continue
		}
		if m := givenUpRows.FindStringSubmatch(line); m != nil {
			rows, _ := strconv.Atoi(m[1])
			n += rows
		} else {
			n++
		}
	}
	return n
}

// serveThroughOutage starts a relay with lease on pg (schema "faults"),
// enqueues n messages prefix-0 ... and, with their deliveries held by the
// receiver, stops PostgreSQL and lets the receiver accept them: the
// relay's terminal writes now fail. PostgreSQL stays stopped.
func serveThroughOutage(t *testing.T, bin string, pg *pgcluster.Cluster, lease, prefix string, n int) (*proc.Server, *hookReceiver, string) {
	t.Helper()
	hook, url := newHookReceiver(t, true)
	config := writeConfig(t, pg.URL(), url, lease)
	migrate(t, bin, config)
	// The messages are enqueued before the relay starts, so that one claim
	// takes them all and they reach the receiver together: enqueued one
	// by one beside a running relay on a loaded machine, the first were
	// held past their delivery deadline while the last were still being
	// enqueued, and failed.
	for i := range n {
		enqueueCLI(t, bin, config, fmt.Sprintf("%s-%d", prefix, i))
	}
	srv := proc.Serve(t, bin, config, proc.Environ())
	await(t, hook.arrived, n, 20*time.Second, "deliveries reached the receiver", srv)
	pg.Stop()
	close(hook.gate) // the deliveries succeed while the database is down
	await(t, hook.answered, n, 10*time.Second, "deliveries answered", srv)
	return srv, hook, config
}

// checkRows waits until the n rows of prefix are sent and checks each took
// attempts attempts. It polls: the relay is another process.
func checkRows(t *testing.T, pg *pgcluster.Cluster, prefix string, n, attempts int) {
	t.Helper()
	pool := pg.Pool(2)
	var sent, open, wrong int
	testrelay.WaitFor(t, 30*time.Second, "the rows are marked sent", func() bool {
		err := pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE status = 'sent'),
			count(*) FILTER (WHERE status <> 'sent'), count(*) FILTER (WHERE attempts <> $2)
			FROM faults.messages_all WHERE dedup_key LIKE $1 || '-%'`, prefix, attempts).Scan(&sent, &open, &wrong)
		return err == nil && sent == n
	})
	if open != 0 || wrong != 0 {
		t.Errorf("%s: %d rows open, %d rows without %d attempts", prefix, open, wrong, attempts)
	}
}

// checkRecovered checks that serve survived, that a message enqueued after
// the outage is delivered once, and that every message of prefix reached
// the receiver times times.
func checkRecovered(t *testing.T, bin, config string, srv *proc.Server, hook *hookReceiver, prefix string, times int) {
	t.Helper()
	enqueueCLI(t, bin, config, prefix+"-after")
	await(t, hook.answered, 1, 20*time.Second, "messages enqueued after the outage delivered", srv)
	for key, c := range hook.counts() {
		want := times
		if key == prefix+"-after" {
			want = 1
		}
		if c != want {
			t.Errorf("%s delivered %d times, want %d", key, c, want)
		}
	}
	if srv.Exited() || strings.Contains(srv.Logs(), "panic") {
		t.Fatalf("serve died or panicked:\n%s", srv.Logs())
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("serve did not stop cleanly: %v\n%s", err, srv.Logs())
	}
}

// logTimes returns the times of the JSON log lines matching re.
func logTimes(logs string, re *regexp.Regexp) []time.Time {
	var times []time.Time
	for _, line := range strings.Split(logs, "\n") {
		if !re.MatchString(line) {
			continue
		}
		if m := logTime.FindStringSubmatch(line); m != nil {
			if ts, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				times = append(times, ts)
			}
		}
	}
	return times
}

// logTime finds a JSON log line's time.
var logTime = regexp.MustCompile(`"time":"([^"]+)"`)
