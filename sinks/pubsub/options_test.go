package pubsub_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	pubsubsink "github.com/outboxd/outboxd/sinks/pubsub"
)

// TestBadOptions refuses each bad configuration with the option at fault,
// never quoting the inline credentials.
// Mutation: dropping the credential type check from check fails "not
// credentials" (the sink builds).
func TestBadOptions(t *testing.T) {
	t.Parallel()
	const secret = `{"private_key": "s3cret-key"}`
	base := func(extra ...any) map[string]any {
		o := map[string]any{"project": "p1", "topic": "orders"}
		for i := 0; i+1 < len(extra); i += 2 {
			o[extra[i].(string)] = extra[i+1]
		}
		return o
	}
	brokertest.CheckBadOptions(t, pubsubsink.Type.Name, secret, []brokertest.BadOptions{
		{Name: "typo", Options: base("topik", "x"), Want: "topik"},
		{Name: "no project", Options: map[string]any{"topic": "orders"}, Want: "option project: is required"},
		{Name: "no topic", Options: map[string]any{"project": "p1"}, Want: "option topic: is required"},
		{Name: "full topic name", Options: base("topic", "projects/p1/topics/orders"), Want: "option topic: \"projects/p1/topics/orders\" is not a topic id"},
		{Name: "reserved topic", Options: base("topic", "google-x"), Want: "option topic"},
		{Name: "two credentials", Options: base("credentials_file", "/k.json", "credentials_json", secret), Want: "set at most one"},
		{Name: "not credentials", Options: base("credentials_json", secret), Want: `option credentials_json: type "" is not one of`},
		{Name: "not json", Options: base("credentials_json", "s3cret-key"), Want: "option credentials_json: not a JSON object"},
		{Name: "emulator with credentials", Options: base("endpoint", "127.0.0.1:8085", "credentials_file", "/k.json"), Want: "option endpoint: an emulator takes no credentials"},
		{Name: "negative timeout", Options: base("timeout", "-1s"), Want: "option timeout"},
	})
}
