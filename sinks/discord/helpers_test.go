package discord_test

import (
	"encoding/json"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/discord"
	"github.com/outboxd/outboxd/sinks/discord/fakediscord"
)

// newFake starts a fake Discord that stops when t ends.
func newFake(t testing.TB) *fakediscord.Server {
	t.Helper()
	fake := fakediscord.New()
	t.Cleanup(fake.Close)
	return fake
}

// newSink builds a discord sink posting to url (the fake's webhook) with
// extra options, closed when t ends.
func newSink(t testing.TB, name, url string, extra map[string]any) *discord.Sink {
	t.Helper()
	opts := map[string]any{"webhook_url": url, "allow_private": true}
	for k, v := range extra {
		opts[k] = v
	}
	s, err := discord.Type.New(name, opts, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return s.(*discord.Sink)
}

// delivery is a first attempt at a row of sink "ops" with payload.
func delivery(key, payload string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "ops", DedupKey: key, Attempt: 1, MaxAttempts: 5, Payload: json.RawMessage(payload)}
}

// receipt decodes d's receipt.
func receipt(t testing.TB, d *sink.Delivery) discord.Receipt {
	t.Helper()
	var r discord.Receipt
	if err := json.Unmarshal(d.Receipt(), &r); err != nil {
		t.Fatalf("receipt %s: %v", d.Receipt(), err)
	}
	return r
}
