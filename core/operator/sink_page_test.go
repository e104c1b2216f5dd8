package operator_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// SinkMinutes reads the one sink's tallies of the span asked for, oldest
// first; SinkAudit the one sink's entries since the time asked for,
// newest first, at most the limit.
// (Mutations, each failing this test: sink_minutes.sql without its span
// bound, or without its sink; sink_audit.sql without its sink, or
// without its since.)
func TestSinkMinutesAndSinkAuditReadOneSinkOverTheirSpan(t *testing.T) {
	b := coretest.Setup(t)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+".delivery_minutes (sink, minute, sent, retried, dead, latency_buckets) VALUES "+
		"('s', date_trunc('minute', now()) - interval '3 hours', 1, 0, 0, '{}'), "+
		"('s', date_trunc('minute', now()) - interval '5 minutes', 2, 1, 0, '{}'), "+
		"('s', date_trunc('minute', now()), 3, 0, 1, '{}'), "+
		"('other', date_trunc('minute', now()), 4, 0, 0, '{}')"); err != nil {
		t.Fatal(err)
	}
	minutes, err := b.Outbox.SinkMinutes(b.Ctx, b.Pool, "s", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(minutes) != 2 || minutes[0].Sent != 2 || minutes[0].Retried != 1 || minutes[1].Sent != 3 || minutes[1].Dead != 1 {
		t.Errorf("the last hour of s: %+v, want the minutes with 2 and 3 sent, oldest first", minutes)
	}

	for _, sink := range []string{"s", "other", "s"} {
		if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, sink, operator.Pause{By: "erin", Reason: "pause of " + sink}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+".audit_log SET at = now() - interval '2 days' WHERE id = (SELECT min(id) FROM "+
		b.Outbox.Schema()+".audit_log WHERE sink = 's')"); err != nil {
		t.Fatal(err)
	}
	entries, err := b.Outbox.SinkAudit(b.Ctx, b.Pool, "s", time.Now().Add(-24*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Sink != "s" || entries[0].Action != "pause" {
		t.Errorf("the last day's entries of s: %+v, want its second pause only", entries)
	}
	if all, err := b.Outbox.SinkAudit(b.Ctx, b.Pool, "s", time.Time{}, 1); err != nil || len(all) != 1 {
		t.Errorf("at most 1 entry: %d (%v)", len(all), err)
	}
}
