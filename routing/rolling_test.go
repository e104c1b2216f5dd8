package routing_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
)

// ordersRoute is route orders to sink custom with template body, in
// versions v1 {"order": "{{.data.order_id}}"} and v2
// {"order": "{{.data.order.id}}"} (the deploy).
func ordersRoute(body string) map[string]any {
	return map[string]any{"orders": map[string]any{"events": []any{"order.*"}, "to": []any{
		map[string]any{"sink": "custom", "template": map[string]any{"line": body}}}}}
}

// rollingSink records what one relay delivered, by dedup key, and refuses
// (retryably) the rows the other relay is to deliver, so that each relay
// renders rows of both versions.
type rollingSink struct {
	mine func(key string) bool
	mu   sync.Mutex
	got  map[string]string // dedup key -> rendered payload
}

var errNotMine = errors.New("left to the other relay")

func (s *rollingSink) Deliver(_ context.Context, d *sink.Delivery) error {
	if !s.mine(d.DedupKey) {
		return errNotMine
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[d.DedupKey] = string(d.Payload)
	return nil
}

func (s *rollingSink) delivered() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.got)
}

// A v1 relay and a v2 relay run side by side over rows published under v1
// and under v2 (the template changed its field): each renders every row
// with the template of the version it was published under, whichever
// relay delivers it, and no row fails. On main a v2 relay dead-lettered
// the v1 rows with `map has no entry for key "order"`.
// (Mutations: compiledFor ignoring RouteVersion (the relay's own template
// for every row of a route it knows) fails this test: rows die with "map
// has no entry"; versionTarget using the relay's own template whatever
// the digest fails it the same way; publish_batch of migration 007 not
// writing route_version fails it likewise.)
func TestRollingDeployRendersEachRowWithItsVersion(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx := context.Background()
	const v1Body, v2Body = `{"order": "{{.data.order_id}}"}`, `{"order": "{{.data.order.id}}"}`

	publish := func(key string, data map[string]any) {
		t.Helper()
		if _, err := ob.Publish(ctx, pool, outboxd.Event{Type: "order.created", Key: key, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	relayOf := func(body string, mine func(string) bool) (*rollingSink, *routing.Table, relay.Config) {
		rs := &rollingSink{mine: mine, got: map[string]string{}}
		cfg, ps := routing.Parse(ordersRoute(body), "")
		table, more := routing.Compile(cfg, map[string]sink.Sink{"custom": rs})
		if ps = append(ps, more...); len(ps) > 0 {
			t.Fatal(ps)
		}
		fallback := ob.Routes().Fallback(pool)
		return rs, table, relay.Config{PollInterval: 50 * time.Millisecond, Stage: table.Stage(fallback),
			Sinks: []relay.SinkConfig{{Name: "custom", Sink: rs, MaxAttempts: 1000,
				Backoff: relay.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}}}}
	}
	// Keys ending in 0 or 1 are the v1 relay's, the others the v2 relay's.
	v1Sink, v1Table, v1Cfg := relayOf(v1Body, func(k string) bool { return strings.HasSuffix(k, "0/orders") || strings.HasSuffix(k, "1/orders") })
	v2Sink, v2Table, v2Cfg := relayOf(v2Body, func(k string) bool { return !v1Sink.mine(k) })

	apply(t, pool, ob, v1Table)
	want := map[string]string{}
	for i := range 4 {
		key := fmt.Sprintf("old-%d", i)
		publish(key, map[string]any{"order_id": key})
		want["order.created/"+key+"/orders"] = fmt.Sprintf(`{"line":"{\"order\": \"%s\"}"}`, key)
	}
	apply(t, pool, ob, v2Table) // migrate applies version 2 ...
	for i := range 4 {
		key := fmt.Sprintf("new-%d", i)
		publish(key, map[string]any{"order": map[string]any{"id": key}})
		want["order.created/"+key+"/orders"] = fmt.Sprintf(`{"line":"{\"order\": \"%s\"}"}`, key)
	}
	// ... while the v1 relay still runs, next to a v2 relay.
	signals := testrelay.Run(t, pool, ob.Schema(), v1Cfg)
	testrelay.RunWith(t, pool, ob.Schema(), v2Cfg, signals)
	testrelay.WaitFor(t, 60*time.Second, "every row sent or dead", func() bool {
		var done int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM "+ob.Schema()+".messages_all WHERE status IN ('sent', 'dead')").Scan(&done)
		return err == nil && done == len(want)
	})

	got := v1Sink.delivered()
	for k, v := range v2Sink.delivered() {
		got[k] = v
	}
	for key, payload := range want {
		if got[key] != payload {
			t.Errorf("%s was delivered as %q, want %q", key, got[key], payload)
		}
	}
	if len(v1Sink.delivered()) != 4 || len(v2Sink.delivered()) != 4 {
		t.Errorf("the v1 relay delivered %v, the v2 relay %v: want 4 each", v1Sink.delivered(), v2Sink.delivered())
	}
	var dead int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+ob.Schema()+".messages WHERE status = 'dead'").Scan(&dead); err != nil || dead != 0 {
		t.Errorf("%d rows dead (%v), want none", dead, err)
	}
}
