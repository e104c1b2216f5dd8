package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// Row is one message's row as the run ends, read through messages_all.
type Row struct {
	ID          int64
	Sink        string
	DedupKey    string
	OrderingKey string
	Status      status.Row
	Attempts    int
	LastError   string
	// Poisoned is set for the messages the receiver refuses for good.
	Poisoned bool
}

// ProcRecord is one crash as it happened: a relay SIGKILLed at At, or
// SIGSTOPped from At to Until.
type ProcRecord struct {
	Kind      ProcKind
	Relay     string
	At, Until time.Time
}

// Outcome is everything a run saw, for the invariants to check.
type Outcome struct {
	Config Config
	Start  time.Time
	// HealedAt is when every receiver took every request again and every
	// relay ran again.
	HealedAt time.Time
	// DrainedAt is when no row was open any more; zero if that did not
	// happen within DrainBound.
	DrainedAt time.Time
	Rows      []Row
	// Arrivals are every receiver's requests, in arrival order.
	Arrivals []Arrival
	Procs    []ProcRecord
	// Lived holds, per relay label, when it started and stopped.
	Lived map[string][2]time.Time
	// RowUpdates is n_tup_upd of the messages table: every row write but
	// the inserts and the deletes of delivered rows.
	RowUpdates int64
	// RefusedAttempts is how many failed attempts (failed_attempts) had
	// their connection refused: deliveries that cost their claim and their
	// finish, which no receiver counts.
	RefusedAttempts int64
	// Open describes the rows still open when the drain timed out.
	Open string
	// ExpectDead holds the dedup keys a case made dead on purpose (Hooks).
	ExpectDead map[string]bool
	// Marks are the moments a case's hooks noted, by name.
	Marks map[string]time.Time
}

// Hooks let a named case act during a run.
type Hooks struct {
	// AfterStart runs once the relays serve and the schedules began.
	AfterStart func(ctx context.Context, h *Harness)
}

// Harness is a run in progress, for Hooks.
type Harness struct {
	T      testing.TB
	Pool   *pgxpool.Pool
	Schema string
	Start  time.Time
	recv   []*Receiver
	// ExpectDead is where a hook records the rows it makes dead.
	ExpectDead map[string]bool
	// Marks is where a hook notes moments for its case's checks.
	Marks map[string]time.Time
}

// Arrivals returns every request the receivers got so far, in arrival
// order.
func (h *Harness) Arrivals() []Arrival { return mergeArrivals(h.recv) }

func mergeArrivals(recv []*Receiver) []Arrival {
	var all []Arrival
	for _, r := range recv {
		all = append(all, r.Arrivals()...)
	}
	slices.SortFunc(all, func(a, b Arrival) int { return int(a.Seq - b.Seq) })
	return all
}

// settleTimeout is how much longer than the fault phase and the drain a
// run may take: starting and stopping relays, reading the results.
const settleTimeout = 30 * time.Second

// Run runs c with the outboxd binary bin against a fresh schema of the
// test database and returns what happened. It fails the test only when
// the run itself cannot proceed; the invariants are Check's.
func Run(t testing.TB, bin string, c Config, hooks Hooks) *Outcome {
	t.Helper()
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), faultPhase+DrainBound(c)+2*settleTimeout)
	defer cancel()

	seq := &seqCounter{}
	var recv []*Receiver
	var urls []string
	for _, s := range c.Receivers {
		r, err := startReceiver(s, seq)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		recv = append(recv, r)
		urls = append(urls, r.URL())
	}
	cl := &relays{t: t, bin: bin, dir: t.TempDir(), lived: map[string][2]time.Time{}}
	cl.config = func(label string) string { return c.yaml(testdb.URL(), ob.Schema(), label, urls) }
	for range c.Relays {
		cl.add()
	}

	start := time.Now()
	for _, r := range recv {
		r.Begin(start)
	}
	h := &Harness{T: t, Pool: pool, Schema: ob.Schema(), Start: start, recv: recv, ExpectDead: map[string]bool{}, Marks: map[string]time.Time{}}
	produced := make(chan error, 1)
	go func() { produced <- produce(ctx, pool, ob.Outbox, c, start) }()
	crashed := make(chan struct{})
	go func() { defer close(crashed); cl.crash(c.Procs, start) }()
	if hooks.AfterStart != nil {
		hooks.AfterStart(ctx, h)
	}

	if err := <-produced; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	<-crashed
	waitUntil(ctx, start.Add(faultPhase))
	for _, r := range recv {
		r.Heal()
	}
	cl.contAll()
	o := &Outcome{Config: c, Start: start, HealedAt: time.Now(), ExpectDead: h.ExpectDead, Marks: h.Marks}
	o.DrainedAt, o.Open = waitDrained(ctx, pool, ob.Schema(), o.HealedAt.Add(DrainBound(c)))
	cl.stopAll()
	o.Procs, o.Lived = cl.procs, cl.lived
	o.Arrivals = mergeArrivals(recv)
	o.Rows = readRows(t, ctx, pool, ob.Schema(), c)
	o.RowUpdates = rowUpdates(t, ctx, pool, ob.Schema())
	o.RefusedAttempts = refusedAttempts(t, ctx, pool, ob.Schema())
	if t.Failed() {
		t.Logf("relay logs (tail):\n%s", cl.logs())
	}
	return o
}

// waitUntil waits until at, or until ctx ends. (It paces the run; it
// waits for nothing.)
func waitUntil(ctx context.Context, at time.Time) {
	timer := time.NewTimer(time.Until(at))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// produce enqueues each sink's messages, spread evenly over EnqueueFor.
func produce(ctx context.Context, pool *pgxpool.Pool, ob *outboxd.Outbox, c Config, start time.Time) error {
	type due struct {
		at  time.Duration
		msg outboxd.Message
	}
	var all []due
	for _, s := range c.Sinks {
		for i := range s.Messages {
			all = append(all, due{at: c.EnqueueFor * time.Duration(i) / time.Duration(s.Messages), msg: message(s, i)})
		}
	}
	slices.SortStableFunc(all, func(a, b due) int { return int(a.at - b.at) })
	for _, d := range all {
		waitUntil(ctx, start.Add(d.at))
		if _, err := ob.Enqueue(ctx, pool, d.msg); err != nil {
			return fmt.Errorf("%s/%s: %w", d.msg.Sink, d.msg.DedupKey, err)
		}
	}
	return nil
}

// message is the i-th message of sink s.
func message(s Sink, i int) outboxd.Message {
	m := outboxd.Message{Sink: s.Name, DedupKey: fmt.Sprintf("%s-%03d", s.Name, i)}
	if s.OrderingKeys > 0 {
		m.OrderingKey = fmt.Sprintf("%s-order-%d", s.Name, i%s.OrderingKeys)
	}
	switch s.Kind {
	case KindSlack:
		text := m.DedupKey
		if s.Poisoned(i) {
			text += " " + poisonMark
		}
		m.Payload = map[string]string{"channel": s.Channels[i%len(s.Channels)], "text": text}
	default:
		raw, _ := json.Marshal(payload{Key: m.DedupKey, Poison: s.Poisoned(i)})
		m.Payload = json.RawMessage(raw)
	}
	return m
}

// waitDrained polls the table (the relays are other processes) until no
// row is open or deadline passes; it returns when the last row closed, or
// a description of the open rows.
func waitDrained(ctx context.Context, pool *pgxpool.Pool, schema string, deadline time.Time) (time.Time, string) {
	q := fmt.Sprintf(`SELECT count(*) FROM %s.messages_all WHERE status NOT IN ($1, $2)`, schema)
	for time.Now().Before(deadline) {
		var open int
		if err := pool.QueryRow(ctx, q, status.Sent, status.Dead).Scan(&open); err == nil && open == 0 {
			return time.Now(), ""
		}
		waitUntil(ctx, time.Now().Add(drainPoll))
	}
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT id, sink, dedup_key, status, attempts, (available_at - now())::text, coalesce(last_error, '')
		FROM %s.messages WHERE phase = 'open' ORDER BY id LIMIT 10`, schema))
	if err != nil {
		return time.Time{}, err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals, _ := rows.Values()
		fmt.Fprintf(&b, "  %v\n", vals)
	}
	return time.Time{}, b.String()
}

// drainPoll is how often waitDrained looks.
const drainPoll = 200 * time.Millisecond

// readRows reads every row of the run through messages_all, the view the
// docs name for delivered and open rows alike.
func readRows(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema string, c Config) []Row {
	t.Helper()
	poisoned := map[string]bool{}
	for _, s := range c.Sinks {
		for i := range s.Messages {
			if s.Poisoned(i) {
				poisoned[message(s, i).DedupKey] = true
			}
		}
	}
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT id, sink, dedup_key, coalesce(ordering_key, ''), status, attempts, coalesce(last_error, '')
		FROM %s.messages_all ORDER BY id`, schema))
	if err != nil {
		t.Fatalf("read rows: %v", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.ID, &r.Sink, &r.DedupKey, &r.OrderingKey, &r.Status, &r.Attempts, &r.LastError); err != nil {
			t.Fatalf("read rows: %v", err)
		}
		r.Poisoned = poisoned[r.DedupKey]
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read rows: %v", err)
	}
	return out
}

// rowUpdates reads n_tup_upd of the messages table once it is steady: the
// relays' backends report their counts when they end, a moment after the
// relays stop.
func rowUpdates(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema string) int64 {
	t.Helper()
	read := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'messages'`, schema).Scan(&n); err != nil {
			t.Fatalf("read n_tup_upd: %v", err)
		}
		return n
	}
	last := read()
	for range statsSteadyReads {
		waitUntil(ctx, time.Now().Add(statsFlush))
		n := read()
		if n == last {
			return n
		}
		last = n
	}
	return last
}

// refusedAttempts counts the failed attempts recorded with a refused
// connection (see Outcome.RefusedAttempts).
func refusedAttempts(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.failed_attempts WHERE error LIKE '%%connection refused%%'`, schema)).Scan(&n); err != nil {
		t.Fatalf("count the refused attempts: %v", err)
	}
	return n
}

// PostgreSQL flushes a backend's table counts at most once a second, and
// when it ends; rowUpdates reads until two reads a flush apart agree.
const (
	statsFlush       = 1500 * time.Millisecond
	statsSteadyReads = 10
)

// relays is a run's `outboxd serve` processes.
type relays struct {
	t      testing.TB
	bin    string
	dir    string
	config func(label string) string

	mu      sync.Mutex
	serial  int
	live    []*relay
	past    []*relay
	stopped map[*relay]bool
	procs   []ProcRecord
	lived   map[string][2]time.Time
}

type relay struct {
	label string
	*proc.Server
}

// add starts a relay with a label of its own.
func (rs *relays) add() *relay {
	rs.mu.Lock()
	rs.serial++
	label := fmt.Sprintf("r%d", rs.serial)
	rs.mu.Unlock()
	path := filepath.Join(rs.dir, label+".yaml")
	if err := os.WriteFile(path, []byte(rs.config(label)), 0o600); err != nil {
		rs.t.Fatal(err)
	}
	r := &relay{label: label, Server: proc.Serve(rs.t, rs.bin, path, proc.Environ())}
	rs.mu.Lock()
	rs.live = append(rs.live, r)
	rs.lived[label] = [2]time.Time{time.Now()}
	rs.mu.Unlock()
	return r
}

// crash carries out events at their times after start: a SIGKILLed
// relay is replaced at once, a SIGSTOPped one continued after its For.
// (The timers pace the crashes; they wait for nothing.)
func (rs *relays) crash(events []ProcEvent, start time.Time) {
	var wg sync.WaitGroup
	for _, ev := range events {
		waitUntil(context.Background(), start.Add(ev.At))
		rs.mu.Lock()
		victim := rs.live[ev.Relay%len(rs.live)]
		busy := rs.stopped[victim]
		rs.mu.Unlock()
		if busy {
			continue // still stopped by an earlier event
		}
		switch ev.Kind {
		case ProcKill:
			at := time.Now()
			victim.Kill()
			rs.mu.Lock()
			rs.procs = append(rs.procs, ProcRecord{Kind: ProcKill, Relay: victim.label, At: at, Until: at})
			rs.live = slices.DeleteFunc(rs.live, func(r *relay) bool { return r == victim })
			rs.past = append(rs.past, victim)
			rs.lived[victim.label] = [2]time.Time{rs.lived[victim.label][0], at}
			rs.mu.Unlock()
			rs.add()
		case ProcStop:
			at := time.Now()
			_ = syscall.Kill(victim.Pid(), syscall.SIGSTOP)
			rs.mu.Lock()
			if rs.stopped == nil {
				rs.stopped = map[*relay]bool{}
			}
			rs.stopped[victim] = true
			rs.mu.Unlock()
			wg.Go(func() {
				waitUntil(context.Background(), at.Add(ev.For))
				rs.cont(victim, at)
			})
		}
	}
	wg.Wait()
}

// cont continues a stopped relay and records its stop.
func (rs *relays) cont(r *relay, at time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.stopped[r] {
		return
	}
	_ = syscall.Kill(r.Pid(), syscall.SIGCONT)
	delete(rs.stopped, r)
	rs.procs = append(rs.procs, ProcRecord{Kind: ProcStop, Relay: r.label, At: at, Until: time.Now()})
}

// contAll continues every stopped relay (the crashes are over by then).
func (rs *relays) contAll() {
	rs.mu.Lock()
	var stopped []*relay
	for r := range rs.stopped {
		stopped = append(stopped, r)
	}
	rs.mu.Unlock()
	for _, r := range stopped {
		_ = syscall.Kill(r.Pid(), syscall.SIGCONT)
	}
}

// stopAll stops the live relays with SIGTERM (proc.StopAll, which reports
// one that did not exit cleanly) and records when each ended.
func (rs *relays) stopAll() {
	rs.mu.Lock()
	live := rs.live
	rs.live = nil
	rs.past = append(rs.past, live...)
	rs.mu.Unlock()
	servers := make([]*proc.Server, len(live))
	for i, r := range live {
		servers[i] = r.Server
	}
	proc.StopAll(rs.t, servers, func(i int) {
		rs.mu.Lock()
		rs.lived[live[i].label] = [2]time.Time{rs.lived[live[i].label][0], time.Now()}
		rs.mu.Unlock()
	})
}

// logs is the tail of every relay's log.
func (rs *relays) logs() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var b strings.Builder
	for _, r := range append(slices.Clone(rs.past), rs.live...) {
		fmt.Fprintf(&b, "=== %s\n%s\n", r.label, proc.Tail(r.Logs(), logTail))
	}
	return b.String()
}

// logTail is how many lines of each relay's log a failing run shows.
const logTail = 40
