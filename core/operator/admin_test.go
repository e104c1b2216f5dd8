package operator_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/coretest"
	"github.com/outboxd/outboxd/internal/testrelay"
)

func TestDeadLettersCanBeInspectedRedrivenAndPurged(t *testing.T) {
	b := coretest.Setup(t)
	var healthy atomic.Bool
	rec := coretest.NewRecordingSink()
	rec.Fail = func(d *sink.Delivery) error {
		if !healthy.Load() {
			return errors.New("receiver says no")
		}
		return nil
	}
	b.EnqueueN(t, "s", 3, nil)
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, core.Message{Sink: "other", DedupKey: "x", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	relayCfg := relay.Config{Schema: b.Outbox.Schema(), PollInterval: 10 * time.Millisecond, Sinks: []relay.SinkConfig{
		{Name: "s", Sink: rec, MaxAttempts: 2, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}},
		{Name: "other", Sink: sink.Func(func(_ context.Context, _ *sink.Delivery) error { return sink.Permanent(errors.New("bad payload")) })},
	}}
	signals := testrelay.Run(t, b.Pool, relayCfg)
	signals.WaitWritten(t, 10*time.Second, "", "dead", 4)

	stats, err := b.Outbox.Stats(b.Ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if stats["s"].Dead != 3 || stats["other"].Dead != 1 {
		t.Fatalf("stats = %+v", stats)
	}
	letters, err := b.Outbox.DeadLetters(b.Ctx, b.Pool, operator.DeadLetterFilter{Sink: "s"})
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
	n, err := b.Outbox.Redrive(b.Ctx, b.Pool, operator.RedriveFilter{IDs: []int64{letters[0].ID}})
	if err != nil || n.Rows != 1 {
		t.Fatalf("redrive by id: %+v, %v", n, err)
	}
	if n, err = b.Outbox.Redrive(b.Ctx, b.Pool, operator.RedriveFilter{All: true, Sink: "s"}); err != nil || n.Rows != 2 {
		t.Fatalf("redrive all of s: %+v, %v", n, err)
	}
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 3)

	if _, err := b.Outbox.Purge(b.Ctx, b.Pool, operator.RedriveFilter{}); err == nil {
		t.Fatal("a purge that selects nothing must be refused")
	}
	if n, err = b.Outbox.Purge(b.Ctx, b.Pool, operator.RedriveFilter{All: true}); err != nil || n.Rows != 1 {
		t.Fatalf("purge all: %+v, %v", n, err)
	}
	if c := b.StatusCounts(t); c["dead"] != 0 || c["sent"] != 3 {
		t.Fatalf("after purge: %v", c)
	}
}

func TestStatsReportOldestPendingAge(t *testing.T) {
	b := coretest.Setup(t)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+".messages (sink, dedup_key, payload, created_at) VALUES ('s', 'old', '{}', now() - interval '90 seconds')"); err != nil {
		t.Fatal(err)
	}
	b.EnqueueN(t, "s", 2, nil)
	stats, err := b.Outbox.Stats(b.Ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	s := stats["s"]
	if s.Pending != 3 || s.OldestPendingAge < 90*time.Second || s.OldestPendingAge > 2*time.Minute {
		t.Fatalf("stats = %+v, want 3 pending, the oldest 90s old", s)
	}
}

// Dead letters filter by sink and error text and page with a cursor; a
// dry run counts without changing anything, UpToID keeps a confirmed
// "all" to the rows counted, and ids that name no dead letter are
// reported.
// (Mutations, each failing this test: redrive.sql or purge.sql acting on a
// dry run, redrive.sql ignoring UpToID, purge.sql reporting no missing ids.)
func TestDeadLetterFiltersCursorAndDryRuns(t *testing.T) {
	b := coretest.Setup(t)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.messages (sink, dedup_key, payload, status, attempts, last_error)
		SELECT CASE WHEN g <= 6 THEN 'partner' ELSE 'other' END, 'd' || g, '{"n": 1}', 'dead', 3,
		       CASE WHEN g % 2 = 0 THEN '503 Service UNAVAILABLE' ELSE '400 bad request' END
		FROM generate_series(1, 8) g`); err != nil {
		t.Fatal(err)
	}
	alive := b.EnqueueN(t, "partner", 1, nil)[0]
	list := func(f operator.DeadLetterFilter) []int64 {
		t.Helper()
		letters, err := b.Outbox.DeadLetters(b.Ctx, b.Pool, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, l := range letters {
			if string(l.Payload) != `{"n": 1}` || l.CreatedAt.IsZero() {
				t.Errorf("dead letter without payload or creation time: %+v", l)
			}
			ids = append(ids, l.ID)
		}
		return ids
	}
	unavailable := list(operator.DeadLetterFilter{Sink: "partner", ErrorContains: "unavailable"})
	if len(unavailable) != 3 {
		t.Fatalf("partner's 503s: %v, want 3", unavailable)
	}
	first := list(operator.DeadLetterFilter{Limit: 5})
	rest := list(operator.DeadLetterFilter{Limit: 5, After: first[len(first)-1]})
	if len(first) != 5 || len(rest) != 3 || rest[0] <= first[4] {
		t.Fatalf("pages %v and %v, want 5 then 3 in id order", first, rest)
	}

	sel := operator.RedriveFilter{All: true, Sink: "partner", ErrorContains: "UNAVAILABLE", DryRun: true}
	for name, action := range map[string]func(context.Context, core.DBTX, operator.RedriveFilter) (operator.ActionResult, error){"purge": b.Outbox.Purge, "redrive": b.Outbox.Redrive} {
		plan, err := action(b.Ctx, b.Pool, sel)
		if err != nil || plan.Rows != 3 || plan.LastID != unavailable[2] || !plan.DryRun {
			t.Fatalf("%s dry run: %+v, %v", name, plan, err)
		}
		if c := b.StatusCounts(t); c["dead"] != 8 {
			t.Fatalf("a %s dry run changed rows: %v", name, c)
		}
	}
	sel.DryRun, sel.UpToID = false, unavailable[1]
	done, err := b.Outbox.Redrive(b.Ctx, b.Pool, sel)
	if err != nil || done.Rows != 2 {
		t.Fatalf("redrive up to %d: %+v, %v", unavailable[1], done, err)
	}
	res, err := b.Outbox.Purge(b.Ctx, b.Pool, operator.RedriveFilter{IDs: []int64{unavailable[2], alive, 999999}})
	if err != nil || res.Rows != 1 || len(res.Missing) != 2 || res.Missing[0] != alive || res.Missing[1] != 999999 {
		t.Fatalf("purge by ids: %+v, %v; want 1 purged and the live row and the unknown id missing", res, err)
	}
	if _, err := b.Outbox.Redrive(b.Ctx, b.Pool, operator.RedriveFilter{IDs: []int64{1}, ErrorContains: "x"}); err == nil {
		t.Error("ids with an error filter were accepted")
	}
}
