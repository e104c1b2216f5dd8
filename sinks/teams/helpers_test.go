package teams_test

import (
	"encoding/json"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/teams"
	"github.com/outboxd/outboxd/sinks/teams/faketeams"
)

// newFake starts a fake Workflows webhook that stops when the test ends.
func newFake(t testing.TB) *faketeams.Server {
	t.Helper()
	fake := faketeams.New()
	t.Cleanup(fake.Close)
	return fake
}

// build makes a teams sink called name posting to url, as plugins.yaml
// would.
func build(t testing.TB, name, url string) sink.Sink {
	t.Helper()
	s, err := teams.Type.New(name, map[string]any{"url": url}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func delivery(key, payload string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "alerts", DedupKey: key, Payload: json.RawMessage(payload), Attempt: 1}
}
