package relay_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// A pause by hand stops every relay, for a sink of the shared claim loop
// and for a throttled sink with a loop of its own; a resume restarts them
// at once, and also ends a receiver's Retry-After pause of an hour: the
// relays' own memory of a pause gives way to the database's.
// (Mutations, each failing this test: the listener ignoring pause
// notifications; RefreshPauses keeping a longer pause it knew; resume_sink.sql
// without its notifications, or leaving the rows a Retry-After put off
// where they were; claim.sql without its pause check together with the
// listener ignoring pauses. Either of the last two alone leaves the other
// to stop deliveries, and this test passes; the claim's check alone is
// TestPauseTheRelayHasNotHeardOfStopsClaims's.)
func TestSinkPausedByHandStopsEveryRelayUntilResumed(t *testing.T) {
	b := coretest.Setup(t)
	shared, throttled, limited := coretest.NewRecordingSink(), coretest.NewRecordingSink(), coretest.NewRecordingSink()
	var retryAfterOnce atomic.Bool
	limited.Fail = func(*sink.Delivery) error {
		if retryAfterOnce.CompareAndSwap(false, true) {
			return sink.RetryAfter(time.Hour, errors.New("429 Too Many Requests"))
		}
		return nil
	}
	cfg := relay.Config{PollInterval: 20 * time.Millisecond, Sinks: []relay.SinkConfig{
		{Name: "shared", Sink: shared},
		{Name: "throttled", Sink: throttled, RateLimit: &sink.RateLimit{Rate: 1000, Per: time.Second}},
		{Name: "limited", Sink: limited},
	}}
	signals := &relaysignal.Relay{}
	for range 2 {
		testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), cfg, signals)
	}

	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "shared", operator.Pause{By: "alice", Reason: "partner maintenance"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "throttled", operator.Pause{For: time.Hour, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	b.EnqueueN(t, "shared", 3, nil)
	b.EnqueueN(t, "throttled", 3, nil)
	// One message meets the Retry-After first; the others come once the
	// pause is stored (before the rate-limited outcome is written): rows
	// already in flight beside it could still go out, since a Retry-After
	// pause is not instantaneous (docs/guarantees.md).
	b.EnqueueN(t, "limited", 1, nil)
	signals.WaitWritten(t, 10*time.Second, "limited", "pending", 1)
	b.EnqueueN(t, "limited", 3, nil) // the first again (a duplicate) and two more
	states, err := b.Outbox.SinkStates(b.Ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if s := states["shared"]; !s.Paused() || !s.ByHand || !s.UntilResumed || s.ChangedBy != "alice" || s.ChangeReason != "partner maintenance" {
		t.Errorf("shared: %+v, want paused by alice until resumed", s)
	}
	if s := states["throttled"]; !s.Paused() || !s.ByHand || s.UntilResumed || time.Until(*s.PausedUntil) < 59*time.Minute {
		t.Errorf("throttled: %+v, want paused by hand for an hour", s)
	}
	if s := states["limited"]; s.ByHand || s.ChangedBy != "" {
		t.Errorf("limited: %+v, want paused by its receiver's Retry-After", s)
	}

	// Nothing is delivered while the sinks are paused: the relays' claim
	// loops look for work pausedRounds times without a delivery (a negative
	// needs a span of time; they claim every 20ms and on every enqueue).
	const pausedRounds = 25
	signals.Idle.WaitCount(t, 10*time.Second, "the claim loops to look for work", len(signals.Idle.All())+pausedRounds)
	if n := len(shared.Snapshot()) + len(throttled.Snapshot()) + len(limited.Snapshot()); n != 0 {
		t.Fatalf("%d deliveries to paused sinks", n)
	}

	for _, name := range []string{"shared", "throttled", "limited"} {
		res, err := b.Outbox.ResumeSink(b.Ctx, b.Pool, testdb.Actor, name, "bob", "partner is back")
		if err != nil || !res.WasPaused {
			t.Fatalf("resume %s: %v, %v", name, res, err)
		}
	}
	// Long before any pause would have ended.
	for _, name := range []string{"shared", "throttled", "limited"} {
		signals.WaitWritten(t, 10*time.Second, name, "sent", 3)
	}
	if n := len(shared.Snapshot()) + len(throttled.Snapshot()) + len(limited.Snapshot()); n != 9 {
		t.Fatalf("%d deliveries after the resume, want 3 per sink", n)
	}
	states, _ = b.Outbox.SinkStates(b.Ctx, b.Pool)
	if s := states["shared"]; s.Paused() || s.ChangedBy != "bob" || s.ChangeReason != "partner is back" || s.ChangedAt == nil {
		t.Errorf("after resume: %+v", s)
	}
	if res, err := b.Outbox.ResumeSink(b.Ctx, b.Pool, testdb.Actor, "shared", "bob", ""); err != nil || res.WasPaused {
		t.Errorf("resuming a running sink: %v, %v, want not paused", res, err)
	}
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "shared", operator.Pause{For: -time.Second}); err == nil {
		t.Error("a negative pause was accepted")
	}
}

// A relay that has not heard of a pause (its notification still on the
// way) claims no row of the paused sink: the claim reads the pause from
// the database.
// (Mutation: claim.sql without its pause check fails this test.)
func TestPauseTheRelayHasNotHeardOfStopsClaims(t *testing.T) {
	b := coretest.Setup(t)
	rec := coretest.NewRecordingSink()
	signals := &relaysignal.Relay{}
	testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: rec}}}, signals)
	// The relay has loaded the pauses (none) and listens; the pause is
	// stored as PauseSink stores it, but without the notification.
	signals.Listening.WaitCount(t, 10*time.Second, "the relay listening", 1)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+".sink_limits (sink, paused_until, manual_until, until_resumed, changed_by) "+
		"VALUES ('s', now() + interval '1 hour', now() + interval '1 hour', false, 'alice')"); err != nil {
		t.Fatal(err)
	}
	b.EnqueueN(t, "s", 3, nil)
	const pausedRounds = 25
	signals.Idle.WaitCount(t, 10*time.Second, "the claim loop to look for work", len(signals.Idle.All())+pausedRounds)
	if n := len(rec.Snapshot()); n != 0 {
		t.Fatalf("%d deliveries to a sink paused in the database", n)
	}
	// The relay does deliver them once the pause ends (and it is told).
	if res, err := b.Outbox.ResumeSink(b.Ctx, b.Pool, testdb.Actor, "s", "bob", ""); err != nil || !res.WasPaused {
		t.Fatalf("resume: %v, %v", res, err)
	}
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 3)
}
