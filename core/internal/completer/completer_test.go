package completer_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// One terminal write holding every kind of outcome lands each on its own
// row: delivered rows move to history with their own receipts, a failed
// row keeps its error and records the attempt, a deferred row gets its
// attempt back and counts the deferral, and of two outcomes of one row
// (a late completion under a lease that expired, then the current one)
// only the current lease's is written, and only it is reported written.
// (Mutations: receipts keyed by the row's id alone in byLease and
// finish.sql fails this test, the late outcome, after the current one in
// the batch, wins the receipt; the lease test dropped from finish.sql's
// delivered rows fails it, a row re-claimed by another relay is delivered
// by the late one; the written outcomes keyed by id alone in the completer,
// as before this test checked the reports, fails it: the late outcome
// beside the current one is reported written; finish.sql taking only
// outcomes with the status 'sent' as delivered, as before the completer
// passed them with an id and a token alone, fails it: no delivered row is
// written.)
func TestOneWriteLandsEachOutcomeOnItsOwnRow(t *testing.T) {
	b := coretest.Setup(t)
	ids := b.EnqueueN(t, "s", 5, nil)
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	// Claimed as the claim does: a lease token each, an attempt spent.
	tokens := make([][16]byte, len(ids))
	for i, id := range ids {
		tokens[i] = uuid.New()
		if _, err := b.Pool.Exec(b.Ctx, fmt.Sprintf(`UPDATE %s.messages SET status = 'in_progress', attempts = 1,
			lease_token = $2, lease_expires_at = now() + interval '1 minute' WHERE id = $1`, b.Outbox.Schema()), id, tokens[i]); err != nil {
			t.Fatal(err)
		}
	}
	expired := [16]byte(uuid.New()) // the lease of an earlier claim of ids[0] and of ids[4]
	errText := "receiver answered 503"
	written := map[string]bool{}
	report := func(name string) completer.Reporter {
		return completer.ReportFunc(func(ok bool) { written[name] = ok })
	}
	c := completer.New(b.Pool, q, false, slog.New(slog.DiscardHandler), 100)
	c.WriteNow([]completer.Outcome{
		{ID: ids[0], Token: tokens[0], Status: "sent", Receipt: []byte(`"current"`), Done: report("current")},
		{ID: ids[0], Token: expired, Status: "sent", Receipt: []byte(`"late"`), Done: report("late beside current")},
		{ID: ids[1], Token: tokens[1], Status: "sent", Receipt: []byte(`{"ts": "1.5"}`), Done: report("delivered")},
		{ID: ids[2], Token: tokens[2], Status: "failed", Delay: time.Minute, Err: &errText, Done: report("failed")},
		{ID: ids[3], Token: tokens[3], Status: "pending", Delay: time.Minute, Refund: 1, Deferred: 1, Done: report("deferred")},
		{ID: ids[4], Token: expired, Status: "sent", Receipt: []byte(`"late"`), Done: report("late")},
	})
	for name, want := range map[string]bool{"current": true, "late beside current": false, "delivered": true, "failed": true,
		"deferred": true, "late": false} {
		if got, ok := written[name]; !ok || got != want {
			t.Errorf("outcome %q reported written %t (reported: %t), want %t", name, got, ok, want)
		}
	}
	type row struct {
		Status              string
		Attempts, Deferrals int
		Receipt, LastError  string // "" for none
		History             bool
	}
	want := []row{
		{Status: "sent", Attempts: 1, Receipt: `"current"`, History: true},
		{Status: "sent", Attempts: 1, Receipt: `{"ts": "1.5"}`, History: true},
		{Status: "failed", Attempts: 1, LastError: errText},
		{Status: "pending", Attempts: 0, Deferrals: 1},
		{Status: "in_progress", Attempts: 1},
	}
	for i, id := range ids {
		var got row
		err := b.Pool.QueryRow(b.Ctx, fmt.Sprintf(`SELECT status, attempts, deferrals, COALESCE(receipt::text, ''), COALESCE(last_error, ''),
			EXISTS (SELECT FROM %[1]s.messages_history h WHERE h.id = a.id)
			FROM %[1]s.messages_all a WHERE id = $1`, b.Outbox.Schema()), id).
			Scan(&got.Status, &got.Attempts, &got.Deferrals, &got.Receipt, &got.LastError, &got.History)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got, want[i])
		}
	}
	var recorded int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+b.Outbox.Schema()+".failed_attempts WHERE message_id = $1", ids[2]).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != 1 {
		t.Errorf("the failed attempt recorded %d times, want 1", recorded)
	}
}
