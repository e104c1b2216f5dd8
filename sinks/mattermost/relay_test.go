package mattermost_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks/mattermost/fakemattermost"
)

// relayDeadline bounds how long the relay test waits for deliveries, on a
// loaded machine.
const relayDeadline = 60 * time.Second

// TestRelayDeliversThroughMattermost runs the real relay on a fresh
// outbox: a route renders published events through the sink's shape
// (text and channel templates), another posts one without a template,
// into posts on the fake server, whose rate
// limiter (on, and tighter than the sink's default) answers some
// requests 429 with Retry-After. Every event arrives exactly once, in
// its channel, under its delivery id, though each row may be attempted
// only once: Mattermost's "later" spends no attempt.
// Mutation: classifying a 429 as a plain retryable error (an attempt
// spent) dead-letters the throttled rows and fails this test.
func TestRelayDeliversThroughMattermost(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	fake := newFake(t)
	fake.AddChannel("orders")
	fake.Limit(4, 4)
	chat := build(t, "chat", fake.HookURL(fakemattermost.Hook), nil)
	cfg, ps := routing.Parse(map[string]any{
		"orders": map[string]any{"events": []any{"order.*"},
			"to": []any{map[string]any{"sink": "chat", "template": map[string]any{"text": "Order {{.key}}: {{.data.total}} EUR", "channel": "orders"}}}},
		// Without a template: the sink's shape lays the event out.
		"audits": map[string]any{"events": []any{"audit.*"}, "to": []any{"chat"}},
	}, "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{"chat": chat})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(t.Context(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	const events = 12
	for i := range events {
		ev := outboxd.Event{Type: "order.created", Key: fmt.Sprint(i), Data: json.RawMessage(fmt.Sprintf(`{"total": %d}`, 10*i))}
		if _, err := ob.Publish(t.Context(), pool, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ob.Publish(t.Context(), pool, outboxd.Event{Type: "audit.login", Key: "ada", Data: json.RawMessage(`{"ok": true}`)}); err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
		Sinks:        []relay.SinkConfig{{Name: "chat", Type: "mattermost", Sink: chat, MaxAttempts: 1}},
		Stage:        table.Stage(nil),
		PollInterval: 50 * time.Millisecond,
	})
	signals.WaitWritten(t, relayDeadline, "chat", "sent", events+1)

	texts := map[string]string{}
	for _, p := range fake.Posts() {
		id, _ := p.Props["outboxd_delivery_id"].(string)
		if _, dup := texts[id]; dup {
			t.Errorf("%s posted twice", id)
		}
		texts[id] = p.Channel + ": " + p.Text
	}
	for i := range events {
		id := fmt.Sprintf("chat/order.created/%d/orders", i)
		if want := fmt.Sprintf("orders: Order %d: %d EUR", i, 10*i); texts[id] != want {
			t.Errorf("%s: %q, want %q", id, texts[id], want)
		}
	}
	if got, want := texts["chat/audit.login/ada/audits"], "town-square: **audit.login** ada\n```json\n{\"ok\": true}\n```"; got != want {
		t.Errorf("the untemplated event: %q, want %q", got, want)
	}
	t.Logf("the fake throttled %d requests", fake.Throttled())
}
