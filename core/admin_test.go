package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testrelay"
)

func TestDeadLettersCanBeInspectedRedrivenAndPurged(t *testing.T) {
	b := setup(t)
	var healthy atomic.Bool
	sink := newRecordingSink()
	sink.fail = func(d *core.Delivery) error {
		if !healthy.Load() {
			return errors.New("receiver says no")
		}
		return nil
	}
	enqueueN(t, b, "s", 3, nil)
	if _, err := b.ob.Enqueue(b.ctx, b.pool, core.Message{Sink: "other", DedupKey: "x", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	relayCfg := core.Config{Outbox: b.ob, PollInterval: 10 * time.Millisecond, Sinks: []core.SinkConfig{
		{Name: "s", Sink: sink, MaxAttempts: 2, Backoff: core.Backoff{Initial: time.Millisecond, Max: time.Millisecond}},
		{Name: "other", Sink: core.SinkFunc(func(_ context.Context, _ *core.Delivery) error { return core.Permanent(errors.New("bad payload")) })},
	}}
	testrelay.Run(t, b.pool, relayCfg)
	testrelay.WaitFor(t, 10*time.Second, "4 dead", func() bool { return statusCounts(t, b)["dead"] == 4 })

	stats, err := b.ob.Stats(b.ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	if stats["s"].Dead != 3 || stats["other"].Dead != 1 {
		t.Fatalf("stats = %+v", stats)
	}
	letters, err := b.ob.DeadLetters(b.ctx, b.pool, core.DeadLetterFilter{Sink: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 3 {
		t.Fatalf("%d dead letters of sink s, want 3", len(letters))
	}
	if l := letters[0]; l.Attempts != 2 || len(l.Errors) != 2 || l.Errors[1].Attempt != 2 || l.Errors[0].Error != "receiver says no" {
		t.Fatalf("dead letter = %+v, want two recorded failed attempts", l)
	}

	healthy.Store(true)
	n, err := b.ob.Redrive(b.ctx, b.pool, core.RedriveFilter{IDs: []int64{letters[0].ID}})
	if err != nil || n != 1 {
		t.Fatalf("redrive by id: %d, %v", n, err)
	}
	if n, err = b.ob.Redrive(b.ctx, b.pool, core.RedriveFilter{All: true, Sink: "s"}); err != nil || n != 2 {
		t.Fatalf("redrive all of s: %d, %v", n, err)
	}
	testrelay.WaitFor(t, 10*time.Second, "the redriven rows sent", func() bool { return statusCounts(t, b)["sent"] == 3 })

	if _, err := b.ob.Purge(b.ctx, b.pool, core.RedriveFilter{}); err == nil {
		t.Fatal("a purge that selects nothing must be refused")
	}
	if n, err = b.ob.Purge(b.ctx, b.pool, core.RedriveFilter{All: true}); err != nil || n != 1 {
		t.Fatalf("purge all: %d, %v", n, err)
	}
	if c := statusCounts(t, b); c["dead"] != 0 || c["sent"] != 3 {
		t.Fatalf("after purge: %v", c)
	}
}

func TestStatsReportOldestPendingAge(t *testing.T) {
	b := setup(t)
	if _, err := b.pool.Exec(b.ctx, "INSERT INTO "+b.ob.Schema()+".messages (sink, dedup_key, payload, created_at) VALUES ('s', 'old', '{}', now() - interval '90 seconds')"); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, b, "s", 2, nil)
	stats, err := b.ob.Stats(b.ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	s := stats["s"]
	if s.Pending != 3 || s.OldestPendingAge < 90*time.Second || s.OldestPendingAge > 2*time.Minute {
		t.Fatalf("stats = %+v, want 3 pending, the oldest 90s old", s)
	}
}

func TestMaintenancePrunesOldSentRowsOnly(t *testing.T) {
	b := setup(t)
	_, err := b.pool.Exec(b.ctx, "INSERT INTO "+b.ob.Schema()+`.messages (sink, dedup_key, payload, status, sent_at)
		SELECT 's', 'old' || g, '{}'::jsonb, 'sent', now() - interval '2 hours' FROM generate_series(1, 12000) g
		UNION ALL SELECT 's', 'recent', '{}', 'sent', now()
		UNION ALL SELECT 's', 'dead', '{}', 'dead', NULL`)
	if err != nil {
		t.Fatal(err)
	}
	testrelay.Run(t, b.pool, core.Config{Outbox: b.ob, SentRetention: time.Hour, Sinks: []core.SinkConfig{{Name: "s", Sink: newRecordingSink()}}})
	testrelay.WaitFor(t, 20*time.Second, "old sent rows pruned", func() bool { return statusCounts(t, b)["sent"] == 1 })
	if c := statusCounts(t, b); c["dead"] != 1 {
		t.Fatalf("maintenance must keep dead rows until redriven or purged: %v", c)
	}
}
