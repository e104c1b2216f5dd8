package core_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testrelay"
)

// startRelay runs a relay until the returned stop is called (or the test
// ends) and returns it.
func startRelay(t *testing.T, pool *pgxpool.Pool, cfg core.Config) (*core.Relay, func()) {
	t.Helper()
	relay, err := core.NewRelay(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return relay, stop
}

// One relay of the cluster computes the row counts and only its process
// reports the table gauges, so sum() over the pods is right; when it
// stops, another takes over.
// (Mutations, each failing this test: the gauges reported whichever relay
// took the snapshot; take_stats_lead.sql giving the lead to every relay
// that asks.)
func TestStatsSnapshotIsTakenByOneRelayAndReportedOnce(t *testing.T) {
	b := setup(t)
	enqueueN(t, b, "elsewhere", 4, nil) // no relay has this sink: stays pending
	cfg := core.Config{Outbox: b.ob, StatsInterval: 50 * time.Millisecond,
		Sinks: []core.SinkConfig{{Name: "s", Sink: newRecordingSink()}}}
	type pod struct {
		relay  *core.Relay
		stop   func()
		reader *sdkmetric.ManualReader
	}
	var pods []pod
	for range 3 {
		relay, stop := startRelay(t, b.pool, cfg)
		reader := sdkmetric.NewManualReader()
		reg, err := b.ob.RegisterGauges(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), b.pool,
			core.GaugeConfig{Sinks: []string{"s"}, Refresh: time.Millisecond, Relay: relay})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Unregister() })
		pods = append(pods, pod{relay, stop, reader})
	}
	leader := func(not string) int {
		t.Helper()
		var at int
		// Polls the snapshot: which relay takes it is decided in the
		// database, among the relays, at each stats interval.
		testrelay.WaitFor(t, 10*time.Second, "a relay other than "+not+" leading", func() bool {
			snap, err := b.ob.StatsSnapshot(b.ctx, b.pool)
			if err != nil || snap.TakenBy == not || time.Since(snap.TakenAt) > time.Second {
				return false
			}
			for i, p := range pods {
				if p.relay.ID() == snap.TakenBy && snap.Sinks["elsewhere"].Pending == 4 {
					at = i
					return true
				}
			}
			return false
		})
		return at
	}
	reporting := func() []int {
		t.Helper()
		var out []int
		for i, p := range pods {
			var rm metricdata.ResourceMetrics
			if err := p.reader.Collect(b.ctx, &rm); err != nil {
				t.Fatal(err)
			}
			if rows, _ := findMetric(rm, "outbox.rows"); rows.Data != nil && len(rows.Data.(metricdata.Gauge[int64]).DataPoints) > 0 {
				out = append(out, i)
			}
		}
		return out
	}

	first := leader("")
	if got := reporting(); len(got) != 1 || got[0] != first {
		t.Fatalf("pods %v report the table gauges, want only the leader %d", got, first)
	}
	// The lead sticks: the next snapshots, taken while every relay tries
	// for the lead each round, stay with one relay, changing hands only
	// when the leader misses statsLeadTimeout rounds (a loaded machine
	// does that now and then). Relays taking turns change hands at
	// almost every snapshot.
	takenBy := map[time.Time]string{}
	testrelay.WaitFor(t, 10*time.Second, "eleven more snapshots", func() bool {
		if snap, err := b.ob.StatsSnapshot(b.ctx, b.pool); err == nil {
			takenBy[snap.TakenAt] = snap.TakenBy
		}
		return len(takenBy) >= 12
	})
	times := slices.SortedFunc(maps.Keys(takenBy), time.Time.Compare)
	handovers := 0
	for i := 1; i < len(times); i++ {
		if takenBy[times[i]] != takenBy[times[i-1]] {
			handovers++
		}
	}
	if handovers > (len(times)-1)/2 {
		t.Fatalf("the lead changed hands %d times in %d snapshots, want one relay to keep it", handovers, len(times))
	}
	pods[first].stop()
	second := leader(pods[first].relay.ID())
	// Polls the gauges: each pod's reader reports what its relay last
	// learnt at its own refresh.
	testrelay.WaitFor(t, 5*time.Second, "the new leader reporting alone", func() bool {
		got := reporting()
		return len(got) == 1 && got[0] == second
	})
}

// Every relay adds its deliveries to per-minute counts; the rates and
// latency percentiles come from them, not from sent rows.
// (Mutations, each failing this test: delivery_rates.sql counting sent
// rows of messages; the tally not counting retries.)
func TestDeliveryRatesComeFromPerMinuteCounts(t *testing.T) {
	b := setup(t)
	slow := core.SinkFunc(func(ctx context.Context, _ *core.Delivery) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	failing := core.SinkFunc(func(context.Context, *core.Delivery) error { return errors.New("nope") })
	cfg := core.Config{Outbox: b.ob, PollInterval: 10 * time.Millisecond, StatsInterval: 50 * time.Millisecond, Sinks: []core.SinkConfig{
		{Name: "slow", Sink: slow},
		{Name: "failing", Sink: failing, MaxAttempts: 2, Backoff: core.Backoff{Initial: time.Millisecond, Max: time.Millisecond}},
	}}
	testrelay.Run(t, b.pool, cfg)
	testrelay.Run(t, b.pool, cfg)
	enqueueN(t, b, "slow", 10, nil)
	enqueueN(t, b, "failing", 3, nil)
	var rates map[string]core.DeliveryRate
	// Polls the counts: the relays add theirs at each stats interval, not
	// per delivery.
	testrelay.WaitFor(t, 20*time.Second, "every delivery counted", func() bool {
		var err error
		rates, err = b.ob.DeliveryRates(b.ctx, b.pool, 0)
		return err == nil && rates["slow"].Sent == 10 && rates["failing"].Dead == 3
	})
	// The rows themselves are not read: the counts outlive them (as they
	// outlive pruning).
	if _, err := b.pool.Exec(b.ctx, "DELETE FROM "+b.ob.Schema()+".messages"); err != nil {
		t.Fatal(err)
	}
	again, err := b.ob.DeliveryRates(b.ctx, b.pool, 0)
	if err != nil || again["slow"].Sent != 10 || again["failing"].Dead != 3 || again["failing"].Retried != 3 {
		t.Fatalf("rates after the rows were deleted: %+v, %v; want them unchanged", again, err)
	}
	s := rates["slow"]
	if s.P50 < 25*time.Millisecond || s.P50 > 100*time.Millisecond || s.P99 < s.P50 || s.PerSecond <= 0 || s.Retried != 0 {
		t.Errorf("slow sink: %+v, want 10 sent at about 30ms", s)
	}
	if f := rates["failing"]; f.Retried != 3 || f.Sent != 0 || f.P50 != 0 {
		t.Errorf("failing sink: %+v, want 3 retried and 3 dead", f)
	}
}

// The overview flags a sink whose rows wait while nobody delivers them.
func TestOverviewListsSinksAndFlagsStalledOnes(t *testing.T) {
	b := setup(t)
	if _, err := b.pool.Exec(b.ctx, "INSERT INTO "+b.ob.Schema()+`.messages (sink, dedup_key, payload, created_at)
		VALUES ('forgotten', 'a', '{}', now() - interval '10 minutes'), ('fresh', 'a', '{}', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ob.PauseSink(b.ctx, b.pool, "quiet", core.Pause{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := b.ob.RefreshStatsSnapshot(b.ctx, b.pool, "test"); err != nil {
		t.Fatal(err)
	}
	ov, err := b.ob.Overview(b.ctx, b.pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]core.SinkOverview{}
	var names []string
	for _, s := range ov.Sinks {
		got[s.Sink] = s
		names = append(names, s.Sink)
	}
	if strings.Join(names, ",") != "forgotten,fresh,quiet" || time.Since(ov.TakenAt) > time.Minute || ov.Window != core.DefaultRateWindow {
		t.Fatalf("overview = %+v", ov)
	}
	if !got["forgotten"].Stalled(ov.Window) || got["fresh"].Stalled(ov.Window) || got["quiet"].Stalled(ov.Window) {
		t.Errorf("stalled: forgotten %v, fresh %v, quiet %v; want only forgotten",
			got["forgotten"].Stalled(ov.Window), got["fresh"].Stalled(ov.Window), got["quiet"].Stalled(ov.Window))
	}
	if !got["quiet"].State.Paused() || got["forgotten"].Counts.OldestPendingAge < 9*time.Minute {
		t.Errorf("overview = %+v", ov.Sinks)
	}
}

// The snapshot of the counts reads the partial indexes and the last hour
// of sent rows: with a long delivered history it never scans the table.
// (Mutations, each failing this test: take_stats_snapshot.sql counting
// every sent row, not the last hour's; counting dead rows by status
// instead of the dead index's phase.)
func TestStatsSnapshotPlanSkipsHistory(t *testing.T) {
	b := setup(t)
	for _, stmt := range []string{
		`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, sent_at, created_at)
		 SELECT 'hist', 'h' || g, '{}', 'sent', 1, now() - interval '3 hours', now() - interval '4 hours'
		 FROM generate_series(1, 200000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, sent_at)
		 SELECT 'hist', 'r' || g, '{}', 'sent', 1, now() - (g || ' s')::interval FROM generate_series(1, 2000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload) SELECT 'work', 'w' || g, '{}' FROM generate_series(1, 50000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload, status) SELECT 'work', 'd' || g, '{}', 'dead' FROM generate_series(1, 100) g`,
		`ANALYZE {s}.messages`,
	} {
		if _, err := b.pool.Exec(b.ctx, strings.ReplaceAll(stmt, "{s}", b.ob.Schema())); err != nil {
			t.Fatal(err)
		}
	}
	plan, raw := explain(t, b, b.ob.Statement("take_stats_snapshot"), time.Hour, "test")
	indexes := map[string]bool{}
	plan.walk(func(n planNode) {
		if n.NodeType == "Seq Scan" && n.Relation == "messages" {
			t.Errorf("the snapshot scans the whole messages table:\n%s", raw)
		}
		indexes[n.IndexName] = true
	})
	for _, want := range []string{"messages_open_idx", "messages_sent_idx", "messages_dead_idx"} {
		if !indexes[want] {
			t.Errorf("the snapshot does not use %s (uses %v):\n%s", want, indexes, raw)
		}
	}
	if err := b.ob.RefreshStatsSnapshot(b.ctx, b.pool, "test"); err != nil {
		t.Fatal(err)
	}
	snap, err := b.ob.StatsSnapshot(b.ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := snap.Sinks["hist"], snap.Sinks["work"]; h.SentLastHour != 2000 || w.Pending != 50000 || w.Dead != 100 {
		t.Errorf("snapshot = %+v", snap.Sinks)
	}
}

// A snapshot of an outbox without rows is a snapshot too: taken, with no
// sinks.
func TestStatsSnapshotOfAnEmptyOutbox(t *testing.T) {
	b := setup(t)
	if err := b.ob.RefreshStatsSnapshot(b.ctx, b.pool, "test"); err != nil {
		t.Fatal(err)
	}
	snap, err := b.ob.StatsSnapshot(b.ctx, b.pool)
	if err != nil || snap.TakenAt.IsZero() || snap.TakenBy != "test" || len(snap.Sinks) != 0 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
}
