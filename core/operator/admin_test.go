package operator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
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
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "other", DedupKey: "x", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	relayCfg := relay.Config{PollInterval: 10 * time.Millisecond, Sinks: []relay.SinkConfig{
		{Name: "s", Sink: rec, MaxAttempts: 2, Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}},
		{Name: "other", Sink: sink.Func(func(_ context.Context, _ *sink.Delivery) error { return sink.Permanent(errors.New("bad payload")) })},
	}}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relayCfg)
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
	n, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{IDs: []int64{letters[0].ID}})
	if err != nil || n.Rows != 1 {
		t.Fatalf("redrive by id: %+v, %v", n, err)
	}
	if n, err = b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, Sink: "s"}); err != nil || n.Rows != 2 {
		t.Fatalf("redrive all of s: %+v, %v", n, err)
	}
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 3)

	if _, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{}); err == nil {
		t.Fatal("a purge that selects nothing must be refused")
	}
	if n, err = b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true}); err != nil || n.Rows != 1 {
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
// dry run counts without changing anything, its token keeps a confirmed
// "all" to the rows counted, and ids that name no dead letter are
// reported.
// (Mutations, each failing this test: redrive.sql or purge.sql acting on a
// dry run, redrive.sql ignoring the token's id bound, purge.sql reporting
// no missing ids.)
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
	for name, action := range map[string]func(context.Context, audit.DB, audit.Actor, operator.RedriveFilter) (operator.ActionResult, error){"purge": b.Outbox.Purge, "redrive": b.Outbox.Redrive} {
		plan, err := action(b.Ctx, b.Pool, testdb.Actor, sel)
		if err != nil || plan.Rows != 3 || plan.LastID != unavailable[2] || !plan.DryRun {
			t.Fatalf("%s dry run: %+v, %v", name, plan, err)
		}
		if c := b.StatusCounts(t); c["dead"] != 8 {
			t.Fatalf("a %s dry run changed rows: %v", name, c)
		}
	}
	plan, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, sel)
	if err != nil {
		t.Fatal(err)
	}
	// A row of the selection dies after the count, with a larger id.
	setDead(t, b, alive)
	sel.DryRun, sel.Token = false, plan.Token
	done, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, sel)
	if err != nil || done.Rows != 3 {
		t.Fatalf("confirmed redrive: %+v, %v; want the 3 counted", done, err)
	}
	if m, err := b.Outbox.Message(b.Ctx, b.Pool, alive); err != nil || m.Status != status.Dead {
		t.Fatalf("the row that died after the count: %+v, %v; want it still dead", m, err)
	}
	setDead(t, b, unavailable[2])
	live := b.EnqueueN(t, "partner", 1, keyed("live"))[0]
	res, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{IDs: []int64{unavailable[2], live, 999999}})
	if err != nil || res.Rows != 1 || len(res.Missing) != 2 || res.Missing[0] != live || res.Missing[1] != 999999 {
		t.Fatalf("purge by ids: %+v, %v; want 1 purged and the live row and the unknown id missing", res, err)
	}
	if _, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{IDs: []int64{1}, ErrorContains: "x"}); err == nil {
		t.Error("ids with an error filter were accepted")
	}
}

// keyed gives EnqueueN's messages dedup keys of their own.
func keyed(prefix string) func(int, *outboxd.Message) {
	return func(i int, m *outboxd.Message) { m.DedupKey = fmt.Sprintf("%s-%d", prefix, i) }
}

// setDead makes row id die now with a 503, as a relay's finish would.
func setDead(t *testing.T, b coretest.Bundle, id int64) {
	t.Helper()
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+`.messages
		SET status = 'dead', last_error = '503 unavailable', lease_token = NULL, lease_expires_at = NULL, updated_at = now()
		WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// A confirmation acts on exactly the rows its dry run counted: a row that
// dies after the count is left out whatever its id (an older row, failed
// when counted), and a counted row that is gone (redriven meanwhile) makes
// the confirmation refuse with the new count, doing nothing.
// (Mutations, each failing this test: purge.sql without the @dead_until
// bound, which refuses the confirmation, the older row's death changing
// the set; purge.sql ignoring @digest, which purges the rest of a changed
// selection.)
func TestConfirmationActsOnExactlyTheRowsCounted(t *testing.T) {
	b := coretest.Setup(t)
	ids := b.EnqueueN(t, "partner", 4, nil)
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET status = 'failed', attempts = 1 WHERE id = $1", ids[0]); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		setDead(t, b, id)
	}
	for name, action := range map[string]func(context.Context, audit.DB, audit.Actor, operator.RedriveFilter) (operator.ActionResult, error){"purge": b.Outbox.Purge, "redrive": b.Outbox.Redrive} {
		plan, err := action(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, DryRun: true})
		if err != nil || plan.Rows != 3 || plan.LastID != ids[3] || plan.Token == "" {
			t.Fatalf("%s dry run: %+v, %v", name, plan, err)
		}
		setDead(t, b, ids[0]) // the older row dies after the count
		done, err := action(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, Token: plan.Token})
		if err != nil || done.Rows != 3 {
			t.Fatalf("%s confirmed: %+v, %v; want the 3 counted", name, done, err)
		}
		if m, err := b.Outbox.Message(b.Ctx, b.Pool, ids[0]); err != nil || m.Status != status.Dead {
			t.Fatalf("%s: the older row that died after the count: %+v, %v; want it left dead", name, m, err)
		}
		if name == "redrive" {
			break
		}
		// Purged: make the three dead again for the redrive, under new ids.
		ids = append(ids[:1], b.EnqueueN(t, "partner", 3, keyed("again"))...)
		if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".messages SET status = 'failed' WHERE id = $1", ids[0]); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids[1:] {
			setDead(t, b, id)
		}
	}

	// A counted row redriven by someone else: the selection changed.
	for _, id := range ids {
		setDead(t, b, id)
	}
	plan, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, DryRun: true})
	if err != nil || plan.Rows != 4 {
		t.Fatalf("dry run: %+v, %v", plan, err)
	}
	if _, err := b.Outbox.Redrive(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{IDs: ids[:1]}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, Token: plan.Token})
	if !errors.Is(err, operator.ErrSelectionChanged) || res.Rows != 3 || res.Token == plan.Token {
		t.Fatalf("confirmation of a changed selection: %+v, %v; want ErrSelectionChanged with the new count 3", res, err)
	}
	if c := b.StatusCounts(t); c["dead"] != 3 {
		t.Fatalf("a refused confirmation changed rows: %v", c)
	}
	if res, err = b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, Token: res.Token}); err != nil || res.Rows != 3 {
		t.Fatalf("confirmation with the new token: %+v, %v", res, err)
	}
	for _, bad := range []string{"x", "1.2", "1.2.zz", "-1.0.d41d8cd98f00b204e9800998ecf8427e"} {
		if _, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, operator.RedriveFilter{All: true, Token: bad}); !errors.Is(err, operator.ErrInvalidToken) {
			t.Errorf("token %q: %v, want ErrInvalidToken", bad, err)
		}
	}
}

// UnconfiguredSinks counts at most UnconfiguredCountLimit waiting rows of
// a sink, saying when there are more, and finds the oldest among them: a
// removed sink's large backlog costs each relay's check once a minute a
// bounded read. (Mutation: waiting_rows.sql without its LIMIT fails this
// test with the whole count; ordered by id instead of the open index's
// order, it finds the wrong oldest row.)
func TestUnconfiguredSinksCountsABoundedNumberOfRows(t *testing.T) {
	b := coretest.Setup(t)
	if _, err := b.Pool.Exec(b.Ctx, fmt.Sprintf(`INSERT INTO %s.messages (sink, dedup_key, payload, available_at, created_at)
		SELECT 'removed', 'k' || g, '{}', now() - CASE WHEN g = %d THEN interval '2 hours' ELSE interval '1 minute' END,
		       now() - CASE WHEN g = %[2]d THEN interval '2 hours' ELSE interval '1 minute' END
		FROM generate_series(1, %[2]d) g`, b.Outbox.Schema(), operator.UnconfiguredCountLimit+5)); err != nil {
		t.Fatal(err)
	}
	found, err := b.Outbox.UnconfiguredSinks(b.Ctx, b.Pool, []string{"known"})
	if err != nil || len(found) != 1 {
		t.Fatalf("UnconfiguredSinks = %+v, %v", found, err)
	}
	if s := found[0]; s.Sink != "removed" || s.Waiting != operator.UnconfiguredCountLimit || !s.AtLeast || s.OldestPendingAge < 119*time.Minute {
		t.Errorf("UnconfiguredSinks = %+v, want %d or more rows of removed, the oldest 2 hours old", s, operator.UnconfiguredCountLimit)
	}
}
