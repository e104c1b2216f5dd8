package destinations_test

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/registry"
	sinkdest "github.com/outboxd/outboxd/sinks/destinations"
)

// registerOnce registers the destinations type for the configurations
// these tests load.
var registerOnce sync.Once

// One network policy holds for every destination, whichever sink of type
// destinations delivers the row (a test event goes through the first by
// name): with a sink a-internal allowing private addresses beside
// customers with the defaults, neither reaches a tenant's endpoint on
// loopback; declared once in destinations.network with an allow list,
// both do. (Mutation: applyDestinationNetwork not handing the policy to
// the sinks, so each keeps its own options, fails this test: a-internal
// reaches the loopback endpoint.)
func TestEveryDestinationsSinkDeliversUnderTheOnePolicy(t *testing.T) {
	t.Parallel()
	registerOnce.Do(func() { registry.Register(sinkdest.Type) })
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	e := newEndpoint(t, http.StatusOK)
	c, err := ob.Destinations(keys).Create(t.Context(), pool, testdb.Actor, "acme", destinations.Spec{URL: e.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := ob.Directory(keys, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resources := new(registry.Resources)
	resources.Publish(destinations.DirectoryResource, dir)
	deliverAll := func(t *testing.T, yaml string) map[string]error {
		t.Helper()
		path := filepath.Join(t.TempDir(), "plugins.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		loaded, err := config.Load(config.Source{Path: path, PathGiven: true, Env: func(string) (string, bool) { return "", false },
			Resources: resources}, config.Everything)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]error{}
		for _, sc := range loaded.Config.SinkConfigs() {
			d := &sink.Delivery{ID: 1, Sink: sc.Name, DedupKey: "k-" + sc.Name, Payload: []byte(`{}`), Attempt: 1, MaxAttempts: 3,
				Headers: map[string]string{destinations.Header: c.ID}, CreatedAt: time.Now()}
			out[sc.Name] = sc.Sink.Deliver(t.Context(), d)
		}
		return out
	}

	const sinksBlock = "sinks:\n  a-internal: {type: destinations, options: {allow_private: true}}\n  customers: {type: destinations}\n"
	for name, err := range deliverAll(t, sinksBlock) {
		if !errors.Is(err, netguard.ErrNonPublicAddress) || !sink.IsPermanent(err) {
			t.Errorf("sink %s delivered to a loopback destination with %v, want a permanent refusal by the policy", name, err)
		}
	}
	if got := e.received(); len(got) != 0 {
		t.Fatalf("the loopback endpoint received %v, want nothing", got)
	}

	const declared = "destinations:\n  network: {allow: [127.0.0.0/8, '::1']}\nsinks:\n  a-internal: {type: destinations}\n  customers: {type: destinations}\n"
	for name, err := range deliverAll(t, declared) {
		if err != nil {
			t.Errorf("sink %s: %v, want delivered under the allow list", name, err)
		}
	}
	if got := e.received(); len(got) != 2 {
		t.Fatalf("the endpoint received %v, want one delivery from each sink", got)
	}
}
