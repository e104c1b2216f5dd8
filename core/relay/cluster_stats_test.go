package relay_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// startRelay runs a relay of ob until the returned stop is called (or the
// test ends) and returns it.
func startRelay(t *testing.T, ob *testdb.Outbox, cfg relay.Config) (*relay.Relay, func()) {
	t.Helper()
	r, err := ob.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
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
	return r, stop
}

// One relay of the cluster computes the row counts and only its process
// reports the table gauges, so sum() over the pods is right; when it
// stops, another takes over.
// (Mutations, each failing this test: the gauges reported whichever relay
// took the snapshot; take_stats_lead.sql giving the lead to every relay
// that asks.)
func TestStatsSnapshotIsTakenByOneRelayAndReportedOnce(t *testing.T) {
	b := coretest.Setup(t)
	b.EnqueueN(t, "elsewhere", 4, nil) // no relay has this sink: stays pending
	cfg := relay.Config{StatsInterval: 50 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}}
	type pod struct {
		relay  *relay.Relay
		stop   func()
		reader *sdkmetric.ManualReader
	}
	var pods []pod
	for range 3 {
		r, stop := startRelay(t, b.Outbox, cfg)
		reader := sdkmetric.NewManualReader()
		reg, err := b.Outbox.RegisterGauges(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), b.Pool,
			operator.GaugeConfig{Sinks: []string{"s"}, Refresh: time.Millisecond, Relay: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = reg.Unregister() })
		pods = append(pods, pod{r, stop, reader})
	}
	leader := func(not string) int {
		t.Helper()
		var at int
		// Polls the snapshot: which relay takes it is decided in the
		// database, among the relays, at each stats interval.
		testrelay.WaitFor(t, 10*time.Second, "a relay other than "+not+" leading", func() bool {
			snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
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
			if err := p.reader.Collect(b.Ctx, &rm); err != nil {
				t.Fatal(err)
			}
			if rows, _ := coretest.FindMetric(rm, "outbox.rows"); rows.Data != nil && len(rows.Data.(metricdata.Gauge[int64]).DataPoints) > 0 {
				out = append(out, i)
			}
		}
		return out
	}

	// reportingAlone is the one pod reporting the table gauges, when it is
	// the relay that took the latest snapshot. The pods are collected one
	// after another and on a loaded machine the lead may change hands
	// between two of them (each pod then rightly reports at its own
	// moment), so the checks below poll for such a moment; with every pod
	// reporting (the first mutation above) there is none.
	reportingAlone := func() (int, bool) {
		got := reporting()
		if len(got) != 1 {
			return 0, false
		}
		snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
		return got[0], err == nil && pods[got[0]].relay.ID() == snap.TakenBy
	}

	// A fresh snapshot that has counted the rows; which pod reports it is
	// asked again below, as the lead may move before the gauges are read.
	leader("")
	var first int
	testrelay.WaitFor(t, 5*time.Second, "the leader reporting alone", func() bool {
		var ok bool
		first, ok = reportingAlone()
		return ok
	})
	// The lead sticks: the next snapshots, taken while every relay tries
	// for the lead each round, stay with one relay, changing hands only
	// when the leader misses four rounds (maintenance.Leader; a loaded machine
	// does that now and then). Relays taking turns change hands at
	// almost every snapshot.
	takenBy := map[time.Time]string{}
	testrelay.WaitFor(t, 10*time.Second, "eleven more snapshots", func() bool {
		if snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool); err == nil {
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
		at, ok := reportingAlone()
		return ok && at == second
	})
}

// Every relay adds its deliveries to per-minute counts; the rates and
// latency percentiles come from them, not from sent rows.
// (Mutations, each failing this test: delivery_rates.sql counting sent
// rows of messages; the tally not counting retries.)
func TestDeliveryRatesComeFromPerMinuteCounts(t *testing.T) {
	b := coretest.Setup(t)
	slow := sink.Func(func(ctx context.Context, _ *sink.Delivery) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	failing := sink.Func(func(context.Context, *sink.Delivery) error { return errors.New("nope") })
	cfg := relay.Config{PollInterval: 10 * time.Millisecond, StatsInterval: 50 * time.Millisecond, Sinks: []relay.SinkConfig{
		{Name: "slow", Sink: slow},
		{Name: "failing", Sink: failing, MaxAttempts: 2, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}},
	}}
	testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)
	testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)
	b.EnqueueN(t, "slow", 10, nil)
	b.EnqueueN(t, "failing", 3, nil)
	var rates map[string]operator.DeliveryRate
	// Polls the counts: the relays add theirs at each stats interval, not
	// per delivery.
	testrelay.WaitFor(t, 20*time.Second, "every delivery counted", func() bool {
		var err error
		rates, err = b.Outbox.DeliveryRates(b.Ctx, b.Pool, 0)
		return err == nil && rates["slow"].Sent == 10 && rates["failing"].Dead == 3
	})
	// The rows themselves are not read: the counts outlive them (as they
	// outlive pruning).
	if _, err := b.Pool.Exec(b.Ctx, "DELETE FROM "+b.Outbox.Schema()+".messages"); err != nil {
		t.Fatal(err)
	}
	again, err := b.Outbox.DeliveryRates(b.Ctx, b.Pool, 0)
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
