package relay_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// A routed row that would be dead-lettered goes to its target's
// fallback_after: dead fallback instead: the refused attempt's span ends
// fell-back and names the fallback, the stand-in is delivered once under
// the dedup key <original>/fallback with a span naming the target it
// stands in for and why, and no dead letter is left.
//
// Checked with the mutations, each failing it: fallbackAttrs returning
// nil (no outbox.fallback.from on the stand-in's span); finish without
// its fallBackOnDead call (the row was dead-lettered: timed out).
func TestDeadRowFallsBackAndItsSpansSaySo(t *testing.T) {
	b := coretest.Setup(t)
	tm := newTelemetry(t)
	primary := coretest.NewRecordingSink()
	primary.Fail = func(*sink.Delivery) error { return sink.Permanent(errors.New("channel_not_found")) }
	oncall := coretest.NewRecordingSink()
	cfg := tm.relayConfig(b, relay.SinkConfig{Name: "primary", Sink: primary})
	cfg.Sinks = append(cfg.Sinks, relay.SinkConfig{Name: "oncall", Type: "test", Sink: oncall, Backoff: cfg.Sinks[0].Backoff})
	cfg.Fallbacks = []relay.Fallback{{Route: "alerts", Sink: "primary", To: "oncall", OnDead: true}}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), cfg)
	// A row as publish() writes it for route alerts (no stage here: the
	// sinks see the event as stored).
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+".messages (sink, dedup_key, payload, route) "+
		"VALUES ('primary', 'alert.fired/1/alerts', '{\"type\": \"alert.fired\"}', 'alerts')"); err != nil {
		t.Fatal(err)
	}

	standInSpans := tm.waitSpans(t, signals, "oncall", 1)
	if got := oncall.Snapshot(); len(got) != 1 || got[0].DedupKey != "alert.fired/1/alerts/fallback" {
		t.Fatalf("fallback deliveries %+v, want one of alert.fired/1/alerts/fallback", got)
	}
	attrs := attrsOf(standInSpans[0])
	if from, reason := attrs["outbox.fallback.from"].AsString(), attrs["outbox.fallback.reason"].AsString(); from != "primary" || !strings.Contains(reason, "dead") {
		t.Errorf("stand-in span: outbox.fallback.from %q, reason %q; want primary and a reason naming dead", from, reason)
	}
	refused := tm.Ended("send primary")
	if len(refused) != 1 {
		t.Fatalf("%d spans of the primary, want 1", len(refused))
	}
	if a := attrsOf(refused[0]); a["outbox.outcome"].AsString() != "fell-back" || a["outbox.fallback.to"].AsString() != "oncall" {
		t.Errorf("refused attempt's span: outcome %q, fallback.to %q; want fell-back and oncall", a["outbox.outcome"].AsString(), a["outbox.fallback.to"].AsString())
	}
	// Both rows end in delivered history: the original marked, the
	// stand-in delivered; none is left open or dead.
	testrelay.WaitFor(t, 30*time.Second, "both rows in delivered history", func() bool {
		counts := b.StatusCounts(t)
		return counts["sent"] == 2 && len(counts) == 1
	})
}
