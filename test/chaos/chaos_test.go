package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// ModeEnv selects the scenario size: "full" for CI's full run.
const ModeEnv = "OUTBOXD_CHAOS"

// scenario sizes one chaos run.
type scenario struct {
	messages   int           // committed messages to enqueue (rolled-back ones come on top)
	produceFor time.Duration // producers spread their work over this long
	chaosFor   time.Duration // relays are killed this long
	killEvery  time.Duration // mean time between kills
	relays     int
	converge   time.Duration // deadline for the outbox to drain after the chaos
	tuning     relayTuning
	faults     faults
}

var (
	small = scenario{
		messages: 1500, produceFor: 8 * time.Second, chaosFor: 12 * time.Second,
		killEvery: time.Second, relays: 3, converge: 90 * time.Second,
		tuning: relayTuning{lease: "2s", concurrency: 8, batchSize: 32},
		faults: faults{errors500: 0.08, timeouts: 0.01, slow: 0.005, every429: 4 * time.Second, retryAfter: 1, hold: 2500 * time.Millisecond},
	}
	full = scenario{
		messages: 20000, produceFor: 60 * time.Second, chaosFor: 75 * time.Second,
		killEvery: time.Second, relays: 3, converge: 3 * time.Minute,
		tuning: relayTuning{lease: "2s", concurrency: 16, batchSize: 64},
		faults: faults{errors500: 0.08, timeouts: 0.01, slow: 0.002, every429: 5 * time.Second, retryAfter: 1, hold: 2500 * time.Millisecond},
	}
)

// chaosSchema is the outbox schema of the chaos cluster.
const chaosSchema = "chaos"

// TestChaos: three relays deliver messages from a library, an HTTP API
// and a CLI producer to a webhook receiver that fails a share of requests,
// while relays are SIGKILLed about once a second and PostgreSQL restarts
// once. Every committed message must arrive, validly signed; no rolled-back
// one may (a quarter of the library's transactions roll back); ordering
// keys arrive in order; duplicates stay within what was in flight at each
// kill and at the restart, plus slow responses; poisoned messages die at
// once, doomed ones (always answered 500) after max_attempts, and nothing
// else dies unless every one of its max_attempts attempts failed.
//
// Mutations tried, each failing this test: the claim ignoring expired leases
// (lost: killed relays' rows stay in progress); Enqueue, or EnqueueBatch,
// committing the caller's transaction early (rolled-back messages reach the
// receiver); the completer dropping one outcome in ten (duplicates over the
// bound); every error treated as permanent (dead rows that did not exhaust
// their attempts), or a 408 alone (rows dead after fewer than max_attempts);
// max_attempts ignored (doomed rows never die); the webhook sink sending
// (and signing) a webhook-id that changes with the attempt (requests whose
// webhook-id is not "<sink>/<dedup key>"), or signing without the webhook-id
// (invalid signatures); the claim ignoring earlier open rows of an ordering
// key, or only its failed ones (keys arrive out of order).
func TestChaos(t *testing.T) {
	sc := small
	if os.Getenv(ModeEnv) == "full" {
		sc = full
	} else if testing.Short() {
		t.Skip("chaos: skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(t.Context(), sc.produceFor+sc.chaosFor+sc.converge+time.Minute)
	defer cancel()

	pg := pgcluster.Start(t)
	dir := t.TempDir()
	secret := newSecret(t)
	rc := newReceiver(secret, sc.faults)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	token := "chaos-token-" + rand.Text()
	configFor := func(label string) string {
		return writeConfig(t, dir, label, pg.URL(), srv.URL+"/"+label, secret, token, sc.tuning)
	}
	cl := &cluster{t: t, bin: binary, dir: dir, token: token, env: proc.Environ(),
		config: configFor("commands"), relayConfig: configFor}
	if res, err := proc.Run(ctx, binary, cl.env, nil, "--config", cl.config, "migrate"); err != nil || res.Code != 0 {
		t.Fatalf("outboxd migrate: %v %+v", err, res)
	}
	pool := pg.Pool(4)
	ob := testdb.Open(t, chaosSchema)
	cl.start(sc.relays)

	lease, err := time.ParseDuration(sc.tuning.lease)
	if err != nil {
		t.Fatal(err)
	}

	// Producers: 60% library, 10% HTTP API, 30% CLI files.
	l := newLedger()
	nLib, nAPI := sc.messages*6/10, sc.messages/10
	nCLI := sc.messages - nLib - nAPI
	const cliFiles = 5
	producers := runAll(
		func() error { return libraryProducer(ctx, pool, ob, l, "lib1", nLib/2, 25, sc.produceFor) },
		func() error { return libraryProducer(ctx, pool, ob, l, "lib2", nLib-nLib/2, 25, sc.produceFor) },
		func() error { return apiProducer(ctx, cl, l, "api", nAPI, sc.produceFor) },
		func() error { return cliProducer(ctx, cl, l, "cli", cliFiles, nCLI/cliFiles, sc.produceFor) },
	)

	// Chaos: kill a random relay about every killEvery, restart PostgreSQL
	// once halfway through. A kill loses the outcomes of the killed relay's
	// deliveries that the receiver accepted but whose rows are still in
	// progress; the restart can lose those of every relay. Their sum bounds
	// the duplicates. (The sleeps pace the chaos; they wait for nothing.)
	restarts, lostAtKills, inFlightAtRestarts := 0, 0, 0
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	chaosEnd := time.Now().Add(sc.chaosFor)
	restartAt := time.Now().Add(sc.chaosFor / 2)
	for time.Now().Before(chaosEnd) {
		jitter := time.Duration(rng.Int64N(int64(sc.killEvery))) - sc.killEvery/2
		time.Sleep(sc.killEvery + jitter)
		if restarts == 0 && time.Now().After(restartAt) {
			since := time.Now().Add(-lease)
			before := lostOutcomes(t, ctx, pool, rc, since, "")
			pg.Restart()
			inFlightAtRestarts += max(before, lostOutcomes(t, ctx, pool, rc, since, ""))
			restarts++
			continue
		}
		cl.killOne(rng, func(label string) {
			rc.settle(label, settleTimeout)
			lostAtKills += lostOutcomes(t, ctx, pool, rc, time.Now().Add(-lease), label)
		})
	}
	if err := <-producers; err != nil {
		t.Fatalf("producers: %v", err)
	}

	waitDrained(t, ctx, pool, sc.converge, cl)
	cl.stopAll()

	// Figures and assertions.
	seen := rc.snapshot()
	accepted := seen.accepted
	l.mu.Lock()
	committed, rolledBack := l.committed, l.rolledBack
	l.mu.Unlock()

	// A row dead after max_attempts attempts that all failed was not lost:
	// checkDead accepts it (and logs it) when none was answered 2xx.
	dead, exhausted := checkDead(t, ctx, pool, committed, seen, cl.killedWithin(lease))
	lost, duplicates := 0, 0
	for key, m := range committed {
		if m.poison || m.doom || exhausted[key] {
			continue
		}
		n := len(accepted[key])
		if n == 0 {
			lost++
			if lost <= 10 {
				t.Errorf("lost: %s was committed but never delivered", key)
			}
		}
		duplicates += max(0, n-1)
	}
	if want := sc.messages / minRolledBackShare; len(rolledBack) < want {
		t.Errorf("only %d rolled-back messages, want at least %d for the check to mean something", len(rolledBack), want)
	}
	for key := range rolledBack {
		if len(seen.requests[key]) > 0 {
			t.Errorf("rolled-back message %s reached the receiver", key)
		}
	}
	for key := range accepted {
		if _, ok := committed[key]; !ok {
			t.Errorf("delivered %s, which no producer committed", key)
		}
	}
	if n := rc.badSignature.Load(); n > 0 {
		t.Errorf("%d requests had an invalid signature", n)
	}
	if n := rc.wrongID.Load(); n > 0 {
		t.Errorf("%d validly signed requests had a webhook-id other than their message's <sink>/<dedup key>", n)
	}
	checkRows(t, ctx, pool, committed)
	if rc.count408.Load() == 0 {
		t.Error("the receiver answered no 408: whether a 408 kills a row went untested")
	}
	checkOrdering(t, ctx, pool, accepted)
	checkLogs(t, cl.logs())

	// A duplicate needs a delivery whose outcome was lost: its row was in
	// progress when its relay was killed or the database restarted, or
	// the receiver answered after the relay gave up (slow responses).
	slow := int(rc.slow.Load() + rc.late.Load())
	bound := lostAtKills + inFlightAtRestarts + slow
	if duplicates > bound {
		t.Errorf("%d duplicates, more than the outcomes lost at %d kills (%d) + the rows in progress at %d restarts (%d) + slow or late responses (%d) = %d",
			duplicates, cl.kills, lostAtKills, restarts, inFlightAtRestarts, slow, bound)
	}
	if lost > 0 {
		t.Errorf("%d committed messages lost", lost)
	}
	if t.Failed() {
		t.Logf("relay logs (tail):\n%s", proc.Tail(cl.logs(), 200))
	}
	t.Logf("receiver: 500s=%d 408s=%d timeouts=%d slow=%d late=%d 429s=%d poisoned-requests=%d doomed-requests=%d rolled-back=%d",
		rc.count500.Load(), rc.count408.Load(), rc.timeouts.Load(), rc.slow.Load(), rc.late.Load(), rc.count429.Load(), rc.poisoned.Load(), rc.doomed.Load(), len(rolledBack))
	t.Logf("chaos: messages=%d kills=%d restarts=%d duplicates=%d bound=%d (lost at kills %d, at restarts %d, slow or late %d) dead=%d",
		len(committed), cl.kills, restarts, duplicates, bound, lostAtKills, inFlightAtRestarts, slow, dead)
}

// minRolledBackShare: at least one message in this many (of the committed
// count) must have been rolled back, or the rolled-back check proves little.
const minRolledBackShare = 20

// lostOutcomes counts the rows in progress whose delivery the receiver
// accepted since since (a lease before the fault) from the relay called
// label (any relay for ""): outcomes the fault may have lost, each of which
// may be delivered again. An older acceptance cannot be lost: a delivery
// ends within its lease and its outcome is written at once, and once the
// lease has ended the relay no longer owns the row.
func lostOutcomes(t *testing.T, ctx context.Context, pool *pgxpool.Pool, rc *receiver, since time.Time, label string) int {
	t.Helper()
	keys := rc.acceptedSince(since, label)
	return countRows(t, ctx, pool, `SELECT count(*) FROM chaos.messages_all WHERE status = 'in_progress' AND dedup_key = ANY($1)`, keys)
}

// settleTimeout bounds the wait for the receiver to finish the requests of
// a relay just killed.
const settleTimeout = 5 * time.Second

// countRows runs a count query, retrying briefly while the database comes
// back from a restart (the pool's connections broke).
func countRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	var err error
	for range inProgressTries {
		if err = pool.QueryRow(ctx, query, args...).Scan(&n); err == nil {
			return n
		}
		time.Sleep(inProgressRetry)
	}
	t.Fatalf("count rows: %v", err)
	return 0
}

// How inProgress retries.
const (
	inProgressTries = 10
	inProgressRetry = 200 * time.Millisecond
)

// runAll runs fns concurrently; the channel yields their joined error once
// all have returned.
func runAll(fns ...func() error) <-chan error {
	done := make(chan error, 1)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	go func() { wg.Wait(); done <- errors.Join(errs...) }()
	return done
}

func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// waitDrained waits until no row is pending, in progress or failed. It
// polls the table: the relays are other processes.
func waitDrained(t *testing.T, ctx context.Context, pool *pgxpool.Pool, within time.Duration, cl *cluster) {
	t.Helper()
	deadline := time.Now().Add(within)
	var open int
	for time.Now().Before(deadline) {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM chaos.messages_all WHERE status NOT IN ('sent', 'dead')`).Scan(&open)
		if err == nil && open == 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%d rows still open %s after the chaos ended\n%s\nrelay logs (tail):\n%s", open, within, openRows(ctx, pool), proc.Tail(cl.logs(), 100))
}

// openRows describes where the rows that are still open sit: what a claim
// would need to take them.
func openRows(ctx context.Context, pool *pgxpool.Pool) string {
	var b strings.Builder
	report := func(title, query string) {
		rows, err := pool.Query(ctx, query)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", title, err)
			return
		}
		defer rows.Close()
		fmt.Fprintf(&b, "%s:\n", title)
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				fmt.Fprintf(&b, "  %v\n", err)
				return
			}
			fmt.Fprintf(&b, "  %v\n", vals)
		}
	}
	report("open rows by status, phase, queued_behind, keyed, ready, lease expired", `
		SELECT status, phase, queued_behind, ordering_key IS NOT NULL, available_at <= now(),
		       coalesce(lease_expires_at <= now(), true), count(*), min(id), max(id)
		FROM chaos.messages WHERE phase = 'open' GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6`)
	report("oldest open rows", `
		SELECT id, status, phase, queued_behind, ordering_key, attempts, available_at - now(), lease_expires_at - now()
		FROM chaos.messages WHERE phase = 'open' ORDER BY id LIMIT 10`)
	report("sink limits", `SELECT sink, paused_until - now(), tat - now() FROM chaos.sink_limits`)
	report("breakers", `SELECT * FROM chaos.destination_breakers`)
	return b.String()
}

// checkRows: the table holds exactly the committed messages, each sent or
// dead.
func checkRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, committed map[string]msg) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT dedup_key, status FROM chaos.messages_all`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := 0
	for rows.Next() {
		var key, got string
		if err := rows.Scan(&key, &got); err != nil {
			t.Fatal(err)
		}
		stored++
		if _, ok := committed[key]; !ok {
			t.Errorf("row %s is stored but no producer saw it commit", key)
		}
		if got != string(status.Sent) && got != string(status.Dead) {
			t.Errorf("row %s left %s", key, got)
		}
	}
	if stored != len(committed) {
		t.Errorf("%d rows stored, %d messages committed", stored, len(committed))
	}
}

// checkDead: a message is dead only when it cannot succeed. Poisoned
// messages are dead with the receiver's 400 or 410; doomed ones (always
// answered 500) are dead after max_attempts, with the receiver's 500 once
// all of them reached it; any other dead row must have spent max_attempts
// attempts without the receiver ever answering it 2xx in time. It returns
// how many rows are dead, and the keys of those other rows (their attempts
// ran out).
//
// killed reports whether a request's relay was killed soon after it, so
// that its outcome may have been lost and the attempt abandoned.
func checkDead(t *testing.T, ctx context.Context, pool *pgxpool.Pool, committed map[string]msg, seen record, killed func(arrival) bool) (int, map[string]bool) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT dedup_key, attempts, coalesce(last_error, '') FROM chaos.messages_all WHERE status = 'dead'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	dead, exhausted := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var key, lastErr string
		var attempts int
		if err := rows.Scan(&key, &attempts, &lastErr); err != nil {
			t.Fatal(err)
		}
		dead[key] = true
		switch m := committed[key]; {
		case m.poison:
			if !strings.Contains(lastErr, "HTTP 400") && !strings.Contains(lastErr, "HTTP 410") {
				t.Errorf("poisoned row %s: last error %q, want the receiver's 400 or 410", key, lastErr)
			}
		case m.doom:
			// A kill can abandon an attempt, before it reached the
			// receiver or after; otherwise the last attempt's 500 killed
			// the row.
			reqs := seen.requests[key]
			abandoned := len(reqs) < maxAttempts || killed(reqs[len(reqs)-1])
			if attempts < maxAttempts || !abandoned && (attempts != maxAttempts || !strings.Contains(lastErr, "HTTP 500")) {
				t.Errorf("doomed row %s dead after %d attempts (%d reached the receiver), last error %q; want dead after %d",
					key, attempts, len(reqs), lastErr, maxAttempts)
			}
		case attempts < maxAttempts || seen.answeredOK[key]:
			t.Errorf("row %s dead after %d of %d attempts (answered 2xx: %v), last error %q: it could still succeed",
				key, attempts, maxAttempts, seen.answeredOK[key], lastErr)
		default:
			exhausted[key] = true
			t.Logf("row %s dead after %d attempts that all failed (last error %q)", key, attempts, lastErr)
		}
	}
	var poisoned, doomed int
	for key, m := range committed {
		if m.poison || m.doom {
			if !dead[key] {
				t.Errorf("row %s (poisoned %v, doomed %v) is not dead", key, m.poison, m.doom)
			}
			if m.poison {
				poisoned++
			} else {
				doomed++
			}
		}
	}
	if poisoned == 0 || doomed == 0 {
		t.Errorf("%d poisoned and %d doomed messages: both dead-letter paths must run", poisoned, doomed)
	}
	return len(dead), exhausted
}

// checkOrdering: for every ordering key, the messages first arrived in id
// order.
func checkOrdering(t *testing.T, ctx context.Context, pool *pgxpool.Pool, accepted map[string][]arrival) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT ordering_key, dedup_key FROM chaos.messages_all
		WHERE ordering_key IS NOT NULL AND status = 'sent' ORDER BY ordering_key, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var prevKey, prevMsg string
	var prevSeq int64
	for rows.Next() {
		var ok, key string
		if err := rows.Scan(&ok, &key); err != nil {
			t.Fatal(err)
		}
		arr := accepted[key]
		if len(arr) == 0 {
			continue // reported as lost
		}
		first := arr[0].seq
		if ok == prevKey && first < prevSeq {
			t.Errorf("ordering key %s: %s arrived before the earlier %s", ok, key, prevMsg)
		}
		prevKey, prevMsg, prevSeq = ok, key, first
	}
}

// panicLine finds a Go panic or a fatal runtime error in a relay's output.
var panicLine = regexp.MustCompile(`(?m)^(panic: |fatal error: )`)

func checkLogs(t *testing.T, logs string) {
	t.Helper()
	if m := panicLine.FindString(logs); m != "" {
		t.Errorf("a relay crashed (%q); see the logs", m)
	}
}
