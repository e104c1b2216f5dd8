package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	mrand "math/rand/v2"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/proc"
	"github.com/outboxd/outboxd/test/internal/pgcluster"
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
// one may; ordering keys arrive in order; duplicates stay within kills x
// in-flight limit plus slow responses; only poisoned messages are dead.
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
	cl := &cluster{
		t: t, bin: binary, dir: dir, token: token, env: proc.Environ(),
		config: writeConfig(t, dir, pg.URL(), srv.URL, secret, token, sc.tuning),
	}
	if res, err := proc.Run(ctx, binary, cl.env, nil, "--config", cl.config, "migrate"); err != nil || res.Code != 0 {
		t.Fatalf("outboxd migrate: %v %+v", err, res)
	}
	pool := pg.Pool(4)
	ob, err := core.New(chaosSchema)
	if err != nil {
		t.Fatal(err)
	}
	cl.start(sc.relays)

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
	// once halfway through.
	restarts := 0
	rng := mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	chaosEnd := time.Now().Add(sc.chaosFor)
	restartAt := time.Now().Add(sc.chaosFor / 2)
	for time.Now().Before(chaosEnd) {
		jitter := time.Duration(rng.Int64N(int64(sc.killEvery))) - sc.killEvery/2
		time.Sleep(sc.killEvery + jitter)
		if restarts == 0 && time.Now().After(restartAt) {
			pg.Restart()
			restarts++
			continue
		}
		cl.killOne(rng)
	}
	if err := <-producers; err != nil {
		t.Fatalf("producers: %v", err)
	}

	waitDrained(t, ctx, pool, sc.converge, cl)
	cl.stopAll()

	// Figures and assertions.
	accepted, seen := rc.snapshot()
	l.mu.Lock()
	committed, rolledBack := l.committed, l.rolledBack
	l.mu.Unlock()

	var poisoned []string
	lost, duplicates := 0, 0
	for key, poison := range committed {
		if poison {
			poisoned = append(poisoned, key)
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
	for key := range rolledBack {
		if seen[key] {
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
	checkRows(t, ctx, pool, committed)
	dead := checkDead(t, ctx, pool, poisoned)
	checkOrdering(t, ctx, pool, accepted)
	checkLogs(t, cl.logs())

	// A relay holds at most concurrency rows in delivery plus as many
	// claimed ahead; each kill or restart can lose the outcomes of those.
	inFlightLimit := 2 * sc.tuning.concurrency
	slow := int(rc.slow.Load())
	bound := (cl.kills+restarts)*inFlightLimit + slow
	if duplicates > bound {
		t.Errorf("%d duplicates, more than the bound (kills %d + restarts %d) x in-flight limit %d + slow responses %d = %d",
			duplicates, cl.kills, restarts, inFlightLimit, slow, bound)
	}
	if lost > 0 {
		t.Errorf("%d committed messages lost", lost)
	}
	if t.Failed() {
		t.Logf("relay logs (tail):\n%s", tail(cl.logs(), 200))
	}
	t.Logf("receiver: 500s=%d timeouts=%d slow=%d 429s=%d poisoned-requests=%d rolled-back=%d",
		rc.count500.Load(), rc.timeouts.Load(), slow, rc.count429.Load(), rc.poisoned.Load(), len(rolledBack))
	t.Logf("chaos: messages=%d kills=%d restarts=%d duplicates=%d dead=%d", len(committed), cl.kills, restarts, duplicates, dead)
}

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

// waitDrained waits until no row is pending, in progress or failed.
func waitDrained(t *testing.T, ctx context.Context, pool *pgxpool.Pool, within time.Duration, cl *cluster) {
	t.Helper()
	deadline := time.Now().Add(within)
	var open int
	for time.Now().Before(deadline) {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM chaos.messages WHERE status NOT IN ('sent', 'dead')`).Scan(&open)
		if err == nil && open == 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%d rows still open %s after the chaos ended\n%s", open, within, tail(cl.logs(), 100))
}

// checkRows: the table holds exactly the committed messages, each sent or
// dead.
func checkRows(t *testing.T, ctx context.Context, pool *pgxpool.Pool, committed map[string]bool) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT dedup_key, status FROM chaos.messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := 0
	for rows.Next() {
		var key, status string
		if err := rows.Scan(&key, &status); err != nil {
			t.Fatal(err)
		}
		stored++
		if _, ok := committed[key]; !ok {
			t.Errorf("row %s is stored but no producer saw it commit", key)
		}
		if status != string(core.StatusSent) && status != string(core.StatusDead) {
			t.Errorf("row %s left %s", key, status)
		}
	}
	if stored != len(committed) {
		t.Errorf("%d rows stored, %d messages committed", stored, len(committed))
	}
}

// checkDead: the dead rows are exactly the poisoned messages.
func checkDead(t *testing.T, ctx context.Context, pool *pgxpool.Pool, poisoned []string) int {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT dedup_key, coalesce(last_error, '') FROM chaos.messages WHERE status = 'dead' ORDER BY dedup_key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var dead []string
	for rows.Next() {
		var key, lastErr string
		if err := rows.Scan(&key, &lastErr); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, key)
		if !strings.Contains(lastErr, "HTTP 400") && !strings.Contains(lastErr, "HTTP 410") {
			t.Errorf("dead row %s: last error %q, want the receiver's 400 or 410", key, lastErr)
		}
	}
	sort.Strings(poisoned)
	if strings.Join(dead, ",") != strings.Join(poisoned, ",") {
		t.Errorf("dead rows %v, want exactly the poisoned messages %v", dead, poisoned)
	}
	return len(dead)
}

// checkOrdering: for every ordering key, the messages first arrived in id
// order.
func checkOrdering(t *testing.T, ctx context.Context, pool *pgxpool.Pool, accepted map[string][]arrival) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT ordering_key, dedup_key FROM chaos.messages
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
