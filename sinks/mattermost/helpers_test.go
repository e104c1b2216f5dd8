package mattermost_test

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/mattermost"
	"github.com/outboxd/outboxd/sinks/mattermost/fakemattermost"
)

// newFake starts a fake Mattermost server that stops when the test ends.
func newFake(t testing.TB) *fakemattermost.Server {
	t.Helper()
	fake := fakemattermost.New()
	t.Cleanup(fake.Close)
	return fake
}

// build makes a mattermost sink called name posting to url, with more
// options, as plugins.yaml would.
func build(t testing.TB, name, url string, more map[string]any) sink.Sink {
	t.Helper()
	opts := map[string]any{"url": url}
	maps.Copy(opts, more)
	s, err := mattermost.Type.New(name, opts, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func delivery(key, payload string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "chat", DedupKey: key, Payload: json.RawMessage(payload), Attempt: 1}
}

// deliveryIDs returns the delivery id of every post fake kept.
func deliveryIDs(fake *fakemattermost.Server) []string {
	var ids []string
	for _, p := range fake.Posts() {
		id, _ := p.Props[mattermost.PropDeliveryID].(string)
		ids = append(ids, id)
	}
	return ids
}
