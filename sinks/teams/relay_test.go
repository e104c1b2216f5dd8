package teams_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/teams/faketeams"
)

// relayDeadline bounds how long the relay test waits for deliveries, on a
// loaded machine.
const relayDeadline = 60 * time.Second

// TestRelayDeliversThroughTeams runs the real relay on a fresh outbox
// with a teams sink in front of the fake webhook, which throttles past
// four requests a second and answers the first request 429 with
// Retry-After: every row arrives exactly once as a card, under its
// delivery id, though each row may be attempted only once: Teams'
// "later" spends no attempt.
// Mutation: classifying a 429 as a plain retryable error (an attempt
// spent) dead-letters the throttled rows and fails this test.
func TestRelayDeliversThroughTeams(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	fake := newFake(t)
	fake.Inject(faketeams.Fault{Status: http.StatusTooManyRequests, RetryAfter: time.Second})
	const rows = 12
	msgs := make([]outboxd.Message, rows)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: "alerts", DedupKey: fmt.Sprintf("deploy-%02d", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"title": "Deploy %d", "text": "finished"}`, i))}
	}
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	// Faster than Teams allows, so the fake's own limit answers 429 too.
	fast := &sink.RateLimit{Rate: 20, Per: time.Second, Burst: 10}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
		Sinks:        []relay.SinkConfig{{Name: "alerts", Type: "teams", Sink: build(t, "alerts", fake.WebhookURL()), MaxAttempts: 1, RateLimit: fast}},
		PollInterval: 50 * time.Millisecond,
	})
	signals.WaitWritten(t, relayDeadline, "alerts", "sent", rows)

	got := map[string]int{}
	for _, p := range fake.Posts() {
		got[p.DeliveryID]++
	}
	for i := range rows {
		if id := fmt.Sprintf("alerts/deploy-%02d", i); got[id] != 1 {
			t.Errorf("%s posted %d times, want once", id, got[id])
		}
	}
	if len(got) != rows {
		t.Errorf("%d distinct posts, want %d", len(got), rows)
	}
	t.Logf("the fake throttled %d requests besides the injected 429", fake.Throttled())
}
