package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// syncBuffer is a buffer that logs may write to concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func captureLogs() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func TestRelayDeliversEnqueuedMessages(t *testing.T) {
	b := coretest.Setup(t)
	rec := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "rec", Sink: rec}}})
	b.EnqueueN(t, "rec", 100, nil)
	signals.WaitWritten(t, 30*time.Second, "rec", "sent", 100)
	if n := len(rec.Snapshot()); n != 100 {
		t.Fatalf("%d deliveries, want 100", n)
	}
	if c := b.StatusCounts(t); c["sent"] != 100 {
		t.Fatalf("rows %v, want 100 sent", c)
	}
}

func TestFourRelaysDeliverEveryMessageExactlyOnce(t *testing.T) {
	b := coretest.Setup(t)
	const n = 10_000
	rec := coretest.NewRecordingSink()
	signals := &relaysignal.Relay{}
	for range 4 {
		pool := testdb.Pool(t, 4) // each relay on a pool of its own, like separate pods
		testrelay.RunWith(t, pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "rec", Sink: rec}}, BatchSize: 100}, signals)
	}
	ids := b.EnqueueN(t, "rec", n, nil)
	signals.WaitWritten(t, time.Minute, "rec", "sent", n)
	if c := b.StatusCounts(t); c["sent"] != n {
		t.Fatalf("rows %v, want %d sent", c, n)
	}
	seen := map[int64]int{}
	for _, d := range rec.Snapshot() {
		seen[d.ID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("message %d delivered %d times, want exactly once", id, seen[id])
		}
	}
	if len(seen) != n {
		t.Fatalf("delivered %d distinct messages, want %d", len(seen), n)
	}
}

func TestZombieCompletionChangesNothing(t *testing.T) {
	b := coretest.Setup(t)
	logger, logs := captureLogs()
	release := make(chan struct{})
	firstStarted := make(chan struct{})
	fake := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		if d.Attempt == 1 {
			close(firstStarted)
			<-release // outlives its lease, ignoring ctx like a stuck client
			return d.SetReceipt("zombie")
		}
		if !d.Uncertain {
			t.Errorf("attempt %d after an expired lease must be marked uncertain", d.Attempt)
		}
		return d.SetReceipt("second")
	})
	cfg := relay.Config{Sinks: []relay.SinkConfig{{Name: "s", Sink: fake}},
		Lease: time.Second, PollInterval: 50 * time.Millisecond, Logger: logger}
	signals := &relaysignal.Relay{}
	testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), cfg, signals)
	testrelay.RunWith(t, testdb.Pool(t, 2), b.Outbox.Schema(), cfg, signals)
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "z", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	<-firstStarted
	signals.WaitWritten(t, 20*time.Second, "s", "sent", 1) // the re-claimed row, by the second attempt
	close(release)
	signals.WaitZombie(t, 10*time.Second)
	if !strings.Contains(logs.String(), "zombie") {
		t.Errorf("the zombie's late completion was not logged:\n%s", logs.String())
	}
	var receipt string
	var attempts int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT receipt #>> '{}', attempts FROM "+b.Outbox.Schema()+".messages_all").Scan(&receipt, &attempts); err != nil {
		t.Fatal(err)
	}
	if receipt != "second" || attempts != 2 {
		t.Fatalf("receipt %q after %d attempts; the zombie's late completion must change nothing", receipt, attempts)
	}
}

func TestCrashLoopingMessageEndsDead(t *testing.T) {
	b := coretest.Setup(t)
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: "poison", Payload: "x", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	// Three relays claim the message and die before writing anything. This
	// polls: what it waits for is the database's clock passing each 10 ms
	// lease, which no relay signals.
	for attempt := 1; attempt <= 3; attempt++ {
		testrelay.WaitFor(t, 10*time.Second, fmt.Sprintf("claim %d", attempt), func() bool {
			n, err := relay.ClaimAndAbandon(b.Ctx, b.Pool, b.Outbox.Schema(), []string{"s"}, 10, 10*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
	}
	logger, logs := captureLogs()
	delivered := atomic.Int32{}
	fake := sink.Func(func(context.Context, *sink.Delivery) error { delivered.Add(1); return nil })
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "s", Sink: fake}}, PollInterval: 20 * time.Millisecond, Logger: logger})
	signals.WaitWritten(t, 10*time.Second, "s", "dead", 1)
	if delivered.Load() != 0 {
		t.Fatalf("a message that exhausted its attempts was delivered again")
	}
	// The dead letter is logged before its outcome is signalled.
	for _, want := range []string{"level=ERROR", "dead-lettered", "dedup_key=poison", "sink=s", "attempts=4", "abandoned"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("dead-letter log lacks %q:\n%s", want, logs.String())
		}
	}
}

func TestFailedRowWaitsForBackoffAndRetryAfterKeepsAttempts(t *testing.T) {
	b := coretest.Setup(t)
	const initial = 2 * time.Second
	var mu sync.Mutex
	starts := map[string][]time.Time{}
	fake := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		mu.Lock()
		starts[d.DedupKey] = append(starts[d.DedupKey], time.Now())
		n := len(starts[d.DedupKey])
		mu.Unlock()
		switch {
		case d.DedupKey == "fails-once" && n == 1:
			return errors.New("temporary outage")
		case d.DedupKey == "rate-limited" && n <= 2:
			return sink.RetryAfter(100*time.Millisecond, errors.New("429"))
		}
		return nil
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: fake, Backoff: relay.Backoff{Initial: initial, Max: time.Minute}}}})
	for _, key := range []string{"fails-once", "rate-limited"} {
		if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: key, Payload: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	signals.WaitWritten(t, 20*time.Second, "s", "sent", 2)
	mu.Lock()
	defer mu.Unlock()
	if got := starts["fails-once"]; len(got) != 2 || got[1].Sub(got[0]) < initial*9/10 {
		t.Fatalf("retry came %v after the failure, want at least the %s backoff (less jitter)", got[1].Sub(got[0]), initial)
	}
	var attempts, failedAttempts int
	err := b.Pool.QueryRow(b.Ctx, "SELECT attempts, (SELECT count(*) FROM "+b.Outbox.Schema()+".failed_attempts a WHERE a.message_id = m.id) FROM "+b.Outbox.Schema()+".messages_all m WHERE dedup_key = 'rate-limited'").Scan(&attempts, &failedAttempts)
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || failedAttempts != 0 {
		t.Fatalf("after two RetryAfters and a success: attempts = %d, failed attempts recorded = %d; want 1 and 0", attempts, failedAttempts)
	}
}

func TestOrderingKeysDeliverInIDOrderAcrossRelays(t *testing.T) {
	b := coretest.Setup(t)
	const keys, perKey = 20, 200
	var mu sync.Mutex
	byKey := map[string][]int64{}
	fake := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		if rand.IntN(10) == 0 {
			return errors.New("transient")
		}
		mu.Lock()
		byKey[d.OrderingKey] = append(byKey[d.OrderingKey], d.ID)
		mu.Unlock()
		return nil
	})
	cfg := relay.Config{PollInterval: 10 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: fake, MaxAttempts: 100, Backoff: relay.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}}}}
	signals := &relaysignal.Relay{}
	for range 4 {
		testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
	}
	b.EnqueueN(t, "s", keys*perKey, func(i int, m *outboxd.Message) { m.OrderingKey = fmt.Sprintf("key-%d", i%keys) })
	signals.WaitWritten(t, 2*time.Minute, "s", "sent", keys*perKey)
	mu.Lock()
	defer mu.Unlock()
	for key, ids := range byKey {
		if len(ids) != perKey {
			t.Errorf("%s: %d deliveries, want %d", key, len(ids), perKey)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("%s: id %d delivered after %d", key, ids[i], ids[i-1])
			}
		}
	}
}

// A relay leaves the rows of a sink it does not have alone: they stay
// pending with their attempts untouched (in a rolling deploy they belong to
// a sink the next version adds), the relay warns about them and reports
// them in its outbox.unconfigured_sinks.* gauges, and a relay that has the
// sink delivers each exactly once. (On fb9f77d the old relay dead-lettered
// them. Mutation: the claim taking every sink's ready rows, which the relay
// then hands back, fails this test; so does the rows gauge observing 0.)
func TestUnconfiguredSinkRowsWaitForARelayThatHasTheSink(t *testing.T) {
	b := coretest.Setup(t)
	logger, logs := captureLogs()
	oldSink, newSink := coretest.NewRecordingSink(), coretest.NewRecordingSink()
	// The new version's producers were quicker than the old relay's start:
	// it looks for unconfigured sinks when it starts, then once a minute.
	b.EnqueueN(t, "added", 5, nil)
	tm := newTelemetry(t)
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Logger: logger, PollInterval: 20 * time.Millisecond,
		MeterProvider: tm.MeterProvider, Sinks: []relay.SinkConfig{{Name: "known", Sink: oldSink}}})
	b.EnqueueN(t, "known", 10, nil)
	signals.Written.Wait(t, 10*time.Second, "10 known rows sent", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "sent") == 10
	})
	signals.UnconfiguredSinks.Wait(t, 10*time.Second, "the unconfigured sink reported", func(all [][]string) bool {
		return len(all) > 0 && slices.Contains(all[len(all)-1], "added")
	})
	if c := testdb.StatusCounts(t, b.Pool, b.Outbox, "added"); c["pending"] != 5 || len(c) != 1 {
		t.Fatalf("rows of the unconfigured sink: %v, want 5 pending", c)
	}
	var attempts, touched int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT COALESCE(sum(attempts), 0), count(*) FILTER (WHERE last_error IS NOT NULL OR updated_at <> created_at) FROM "+
		b.Outbox.Schema()+".messages WHERE sink = 'added'").Scan(&attempts, &touched); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || touched != 0 {
		t.Fatalf("the unconfigured sink's rows were attempted %d times, and %d of them changed", attempts, touched)
	}
	if !strings.Contains(logs.String(), "sink=added") || !strings.Contains(logs.String(), "does not have") {
		t.Fatalf("no warning about the unconfigured sink:\n%s", logs.String())
	}
	waiting, err := b.Outbox.UnconfiguredSinks(b.Ctx, b.Pool, []string{"known"})
	if err != nil || len(waiting) != 1 || waiting[0].Sink != "added" || waiting[0].Waiting != 5 {
		t.Fatalf("UnconfiguredSinks = %+v, %v", waiting, err)
	}
	// The gauges (outbox_unconfigured_sinks_* in Prometheus) report them.
	rm := tm.Collect(t)
	if m, ok := coretest.FindMetric(rm, "outbox.unconfigured_sinks.rows"); !ok {
		t.Error("no outbox.unconfigured_sinks.rows gauge")
	} else if p := m.Data.(metricdata.Gauge[int64]).DataPoints; len(p) != 1 || p[0].Value != 5 {
		t.Errorf("outbox.unconfigured_sinks.rows = %+v, want 5", p)
	}
	if m, ok := coretest.FindMetric(rm, "outbox.unconfigured_sinks.oldest_pending.age"); !ok {
		t.Error("no outbox.unconfigured_sinks.oldest_pending.age gauge")
	} else if p := m.Data.(metricdata.Gauge[float64]).DataPoints; len(p) != 1 || p[0].Value <= 0 {
		t.Errorf("outbox.unconfigured_sinks.oldest_pending.age = %+v, want the waiting rows' age", p)
	}

	// The next version's relay has the sink.
	next := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "known", Sink: oldSink}, {Name: "added", Sink: newSink}}})
	next.WaitWritten(t, 10*time.Second, "added", "sent", 5)
	if c := testdb.StatusCounts(t, b.Pool, b.Outbox, "added"); c["sent"] != 5 {
		t.Fatalf("rows of the added sink: %v, want 5 sent", c)
	}
	seen := map[int64]int{}
	for _, d := range newSink.Snapshot() {
		seen[d.ID]++
		if d.Attempt != 1 {
			t.Errorf("row %d delivered at attempt %d, want 1", d.ID, d.Attempt)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("the added sink got %d distinct rows, want 5", len(seen))
	}
}

func TestListenerSurvivesTerminatedConnection(t *testing.T) {
	b := coretest.Setup(t)
	rec := coretest.NewRecordingSink()
	// An hour-long poll interval: only notifications can wake the relay.
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "rec", Sink: rec}}, PollInterval: time.Hour})
	listenerPID := func() int {
		t.Helper()
		var pid int
		err := b.Pool.QueryRow(b.Ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%' || $2 || '%'`,
			relay.ListenerApplicationName, b.Outbox.Schema()).Scan(&pid)
		if err != nil {
			t.Fatalf("no listener connection after the listener signalled: %v", err)
		}
		return pid
	}
	signals.Listening.WaitCount(t, 10*time.Second, "the listener to connect", 1)
	// The loop's first wait is a short one after registering (a producer
	// may have missed it); in the second, only a notification wakes it.
	signals.Idle.WaitCount(t, 10*time.Second, "the claim loop to wait for work", 2)
	first := listenerPID()
	b.EnqueueN(t, "rec", 1, nil)
	signals.WaitWritten(t, 10*time.Second, "rec", "sent", 1)

	if _, err := b.Pool.Exec(b.Ctx, "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	signals.Listening.WaitCount(t, 20*time.Second, "a new listener connection", 2)
	if pid := listenerPID(); pid == first {
		t.Fatalf("the listener signalled a reconnection but still runs on backend %d", pid)
	}
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "rec", DedupKey: "after", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 10*time.Second, "rec", "sent", 2)
	if n := len(rec.Snapshot()); n != 2 {
		t.Fatalf("%d deliveries, want 2", n)
	}
}

func TestPanickingSinkIsAFailedAttempt(t *testing.T) {
	b := coretest.Setup(t)
	var calls atomic.Int32
	fake := sink.Func(func(context.Context, *sink.Delivery) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 10 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: fake, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}}})
	b.EnqueueN(t, "s", 1, nil)
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 1)
	var recorded string
	if err := b.Pool.QueryRow(b.Ctx, "SELECT error FROM "+b.Outbox.Schema()+".failed_attempts").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(recorded, "sink panicked: boom") {
		t.Fatalf("recorded error = %q", recorded)
	}
}

func TestGracefulShutdownFinishesInFlightDeliveries(t *testing.T) {
	b := coretest.Setup(t)
	started := make(chan struct{})
	var once sync.Once
	fake := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		once.Do(func() { close(started) })
		time.Sleep(200 * time.Millisecond) // a delivery in progress when shutdown begins
		return nil
	})
	r, err := b.Outbox.NewRelay(relay.Config{Sinks: []relay.SinkConfig{{Name: "s", Sink: fake}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Ctx)
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	b.EnqueueN(t, "s", 5, nil)
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := b.StatusCounts(t); c["sent"] != 5 {
		t.Fatalf("after shutdown: %v, want all 5 in-flight deliveries finished and written", c)
	}
}

func TestDeleteOnSentRemovesDeliveredRowsAndTheirHistory(t *testing.T) {
	b := coretest.Setup(t)
	var calls sync.Map
	fake := sink.Func(func(_ context.Context, d *sink.Delivery) error {
		if _, again := calls.LoadOrStore(d.ID, true); !again && d.DedupKey == "k-0" {
			return errors.New("first attempt fails")
		}
		return nil
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{DeleteOnSent: true, DurableRelayWrites: true, PollInterval: 10 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: fake, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}}}})
	b.EnqueueN(t, "s", 50, nil)
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 50)
	if c := b.StatusCounts(t); len(c) != 0 {
		t.Fatalf("rows left after every one was delivered: %v", c)
	}
	var orphans int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+b.Outbox.Schema()+".failed_attempts").Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d failed attempts left behind by deleted rows", orphans)
	}
}

// Run returns after the shutdown timeout and a short grace although a sink
// ignores its cancelled context; the sink's row stays leased. (Mutation:
// drain waiting an hour instead of shutdownAbandonAfter fails this test.)
func TestShutdownAbandonsSinksThatIgnoreCancellation(t *testing.T) {
	b := coretest.Setup(t)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	started := make(chan struct{}, 1)
	fake := sink.Func(func(context.Context, *sink.Delivery) error {
		started <- struct{}{}
		<-stuck // ignores its context
		return nil
	})
	r, err := b.Outbox.NewRelay(relay.Config{ShutdownTimeout: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: fake}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	b.EnqueueN(t, "s", 1, nil)
	<-started
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return although its shutdown timeout passed")
	}
	if c := b.StatusCounts(t); c["in_progress"] != 1 {
		t.Fatalf("the abandoned row must stay leased until its lease expires: %v", c)
	}
}

// statementCounter is a pgx tracer that counts the statements containing
// a marker.
type statementCounter struct {
	marker string
	n      atomic.Int64
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, c.marker) {
		c.n.Add(1)
	}
	return ctx
}

func (*statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestCompleterLingersUnlessUrgent: outcomes that arrive close together are
// written in one statement, and an urgent one (its row has an ordering key,
// so the key's next row waits for it) ends the linger at once. The linger
// here is an hour: without the urgent outcome the test would time out.
func TestCompleterLingersUnlessUrgent(t *testing.T) {
	b := coretest.Setup(t)
	cfg, err := pgxpool.ParseConfig(testdb.URL())
	if err != nil {
		t.Fatal(err)
	}
	counter := &statementCounter{marker: "WITH f AS"}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(b.Ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	written := make(chan struct{})
	go func() {
		relay.WriteOutcomes(pool, b.Outbox.Schema(), nil, time.Hour, []relay.TestOutcome{
			{ID: -1, Token: uuid.New(), Status: status.Sent},
			{ID: -2, Token: uuid.New(), Status: status.Sent},
			{ID: -3, Token: uuid.New(), Status: status.Sent},
			{ID: -4, Token: uuid.New(), Status: status.Sent, Urgent: true},
		})
		close(written)
	}()
	select {
	case <-written:
	case <-time.After(10 * time.Second):
		t.Fatal("the urgent outcome did not end the linger")
	}
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("%d terminal-write statements for 4 outcomes, want 1", n)
	}
}

// Run returns an error, instead of retrying quietly for ever, when claims
// fail for a reason retrying cannot fix: the outbox schema is dropped under
// a running relay, the relay's role loses its access to it, or the server
// it reconnects to is read-only. (On fb9f77d Run always returned nil.
// Mutation: pgerr.IsTransient true for every PostgreSQL error fails this
// test, and so does claimFailed never stopping the relay: each case times
// out with "Run kept going"; class 25 made transient fails the read-only
// case.)
func TestRunReturnsAnErrorWhenClaimsCannotSucceed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("schema dropped", func(t *testing.T) {
		t.Parallel()
		pool := testdb.Pool(t, 4)
		ob := testdb.NewSchema(t, pool)
		r, done, signals := runRelayOn(t, pool, ob)
		signals.Listening.Wait(t, 10*time.Second, "the relay to listen", func(all []struct{}) bool { return len(all) > 0 })
		testdb.DropSchemaUnderLoad(ctx, t, pool, ob.Schema())
		t.Cleanup(func() { _, _ = ob.Migrate(ctx, pool) }) // for testdb's own cleanup
		waitRunError(t, done, "42P01", "the missing relation")
		if err := r.Run(ctx); err == nil {
			t.Fatal("a second Run must be refused")
		}
	})
	// The relay runs as a role of its own, which then loses its access to
	// the schema, or whose sessions break and come back read-only, like
	// those of a server that became a standby.
	for _, c := range []struct {
		name, sqlstate, what string
		statements           func(schema, role string) []string
	}{
		{"access revoked", "42501", "the refused permission", func(schema, role string) []string {
			return []string{"REVOKE ALL ON ALL TABLES IN SCHEMA " + schema + " FROM " + role}
		}},
		{"read-only after a failover", "25006", "the read-only transaction", func(_, role string) []string {
			return []string{"ALTER ROLE " + role + " SET default_transaction_read_only = on",
				"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + role + "'"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			admin := testdb.Pool(t, 2)
			ob := testdb.NewSchema(t, admin)
			pool, role := rolePool(t, admin, ob)
			_, done, signals := runRelayOn(t, pool, ob)
			signals.Idle.WaitCount(t, 10*time.Second, "a claim that succeeds", 1)
			for _, stmt := range c.statements(ob.Schema(), role) {
				if _, err := admin.Exec(ctx, stmt); err != nil {
					t.Fatal(err)
				}
			}
			waitRunError(t, done, c.sqlstate, c.what)
		})
	}
}

// rolePool creates a login role with full access to ob's schema, dropped
// when the test ends, and returns a pool of its sessions.
func rolePool(t *testing.T, admin *pgxpool.Pool, ob *testdb.Outbox) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	role := "relay_" + ob.Schema()
	grants := fmt.Sprintf("GRANT USAGE ON SCHEMA %[1]s TO %[2]s; GRANT ALL ON ALL TABLES IN SCHEMA %[1]s TO %[2]s; "+
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA %[1]s TO %[2]s", ob.Schema(), role)
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN; "+grants); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		_, _ = admin.Exec(ctx, "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	cfg, err := pgxpool.ParseConfig(testdb.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.MaxConns = role, 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, role
}

// runRelayOn starts a relay on pool and ob; done yields Run's result.
func runRelayOn(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox) (*relay.Relay, <-chan error, *relaysignal.Relay) {
	t.Helper()
	r := testrelay.New(t, pool, ob.Schema(), relay.Config{PollInterval: 10 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	signals := &relaysignal.Relay{}
	done := make(chan error, 1)
	go func() { done <- r.Run(relaysignal.WithRelay(context.Background(), signals)) }()
	return r, done, signals
}

// waitRunError waits for Run to return an error naming sqlstate.
func waitRunError(t *testing.T, done <-chan error, sqlstate, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), sqlstate) {
			t.Fatalf("Run returned %v, want an error naming %s (%s)", err, what, sqlstate)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run kept going although every claim fails")
	}
}
