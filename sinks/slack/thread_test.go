package slack_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/crashchild"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// The thread child relay reads its outbox schema and fake Slack URL from
// these variables.
const (
	threadChildSchemaEnv = "OUTBOXD_SLACK_THREAD_SCHEMA"
	threadChildAPIEnv    = "OUTBOXD_SLACK_THREAD_API_URL"
)

// incidentRoutes: incident events to Slack as one line each; a resolved
// incident also edits the thread's first message.
func incidentRoutes() map[string]any {
	text := map[string]any{"text": "{{.data.title}}: {{.type}}"}
	return map[string]any{
		"incidents": map[string]any{"events": []any{"incident.opened", "incident.updated"},
			"to": []any{map[string]any{"sink": testSinkName, "template": text}}},
		"resolutions": map[string]any{"events": []any{"incident.resolved"},
			"to": []any{map[string]any{"sink": testSinkName, "template": text, "update_root": true}}},
	}
}

// routedSlack is the slack sink of a test and the stage rendering
// incidentRoutes for it, with the routes applied to ob.
func routedSlack(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, inner sink.Sink) (relay.SinkConfig, relay.Stage) {
	t.Helper()
	cfg, ps := routing.Parse(incidentRoutes(), "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{testSinkName: inner})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(context.Background(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	fallback := ob.Routes().Fallback(pool)
	return relay.SinkConfig{Name: testSinkName, Sink: inner}, table.Stage(fallback)
}

// Three events of one thread across two relay processes, the first relay
// killed right after Slack accepted the thread's first message: Slack
// ends with that message, two replies in its thread, the first message
// edited by the resolution, and nothing posted twice.
// (Mutations: post skipping its history check on a retried row fails this
// test: Slack holds 4 messages; the sink ignoring update_root fails it: the
// root is never edited; publish_batch not ordering by thread_key fails it:
// a reply lands outside the thread.)
func TestThreadSurvivesTheRelayThatPostedItsRoot(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	pool, ob := testdb.New(t)
	routedSlack(t, pool, ob, newSink(t, tokenOptions(fake, nil))) // applies the routes
	for i, typ := range []string{"incident.opened", "incident.updated", "incident.resolved"} {
		ev := outboxd.Event{Type: typ, Key: fmt.Sprint("inc-7-", i), ThreadKey: "inc-7", Data: map[string]string{"title": "DB down"}}
		if _, err := ob.Publish(context.Background(), pool, ev); err != nil {
			t.Fatal(err)
		}
	}

	crashchild.Run(t, "TestThreadRelayChild", threadChildSchemaEnv+"="+ob.Schema(), threadChildAPIEnv+"="+fake.APIURL())
	if posts := fake.Posts(); len(posts) != 1 {
		t.Fatalf("the child posted %d messages, want the thread's first", len(posts))
	}

	signals := &relaysignal.Relay{}
	sc, stage := routedSlack(t, pool, ob, newSink(t, tokenOptions(fake, nil)))
	runRoutedRelay(t, pool, ob, crashLease, signals, stage, sc)
	signals.WaitWritten(t, 30*time.Second, "", "sent", 3)
	if c := testdb.StatusCounts(t, pool, ob, ""); c["sent"] != 3 {
		t.Fatalf("rows %v, want the three sent", c)
	}
	posts := fake.Posts()
	if len(posts) != 3 {
		t.Fatalf("Slack holds %d messages, want 3: %+v", len(posts), posts)
	}
	root := posts[0]
	if root.ThreadTS != "" || root.Text != "DB down: incident.resolved" || root.Updates != 1 {
		t.Errorf("first message %+v, want a top-level post edited once to the resolution", root)
	}
	for i, reply := range posts[1:] {
		if reply.ThreadTS != root.TS || reply.Channel != root.Channel {
			t.Errorf("reply %d %+v is not in the thread %s", i, reply, root.TS)
		}
	}
	if got := []string{posts[1].Text, posts[2].Text}; !slices.Equal(got, []string{"DB down: incident.updated", "DB down: incident.resolved"}) {
		t.Errorf("replies %v, want the update then the resolution", got)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n == 0 {
		t.Errorf("the surviving relay never looked for the first message before posting it again")
	}
}

// TestThreadRelayChild is the child half of
// TestThreadSurvivesTheRelayThatPostedItsRoot: a routed relay whose Slack
// sink SIGKILLs its own process as soon as Slack accepted a post.
func TestThreadRelayChild(t *testing.T) {
	schema := os.Getenv(threadChildSchemaEnv)
	if schema == "" {
		t.Skip("run by TestThreadSurvivesTheRelayThatPostedItsRoot in a child process")
	}
	ob := testdb.Open(t, schema)
	pool := testdb.Pool(t, relayPoolSize)
	inner := newSink(t, map[string]any{"token": fakeslack.Token, "api_url": os.Getenv(threadChildAPIEnv), "channel": testChannel})
	signals := &relaysignal.Relay{}
	sc, stage := routedSlack(t, pool, ob, killAfterPost{inner})
	runRoutedRelay(t, pool, ob, crashLease, signals, stage, sc)
	// The process dies inside the sink; an outcome written means the post
	// failed, and no outcome within the limit means it never happened.
	signals.Written.Wait(t, 30*time.Second, "the relay to post and die", func(all []relaysignal.Outcome) bool { return len(all) > 0 })
	t.Fatalf("the relay recorded %+v instead of dying after the thread's first post", signals.Written.All())
}

// Slack's limit is about one post per second per channel: with
// rate_limit.per_key, three relays post to two channels at 1/s each, each
// channel never more than rate+burst within a second, the two in parallel.
// One slot per relay makes each relay hold one row while it waits for its
// permit, so the relays post to each channel in turn.
// (Mutations: ReserveKeys keeping a row per relay fails this test: 3-4
// posts to a channel within a second; groupByKey giving every row one key
// fails it: the posts take 9 s.)
func TestPerChannelRateLimitAcrossRelays(t *testing.T) {
	t.Parallel()
	const perChannel = 5
	channels := []string{"C0CHANNELA", "C0CHANNELB"}
	fake := newFake(t)
	pool, ob := testdb.New(t)
	sl := newSink(t, tokenOptions(fake, nil))
	sinks := []relay.SinkConfig{{Name: testSinkName, Sink: sl, MaxInFlight: 1, RateLimit: &sink.RateLimit{Rate: 1, Per: time.Second, Burst: 1, PerKey: true}}}
	cfg, ps := routing.Parse(map[string]any{"alerts": map[string]any{"events": []any{"alert.*"}, "to": []any{
		map[string]any{"sink": testSinkName, "template": map[string]any{"text": "{{.key}}", "channel": "{{.data.channel}}"}}}}}, "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{testSinkName: sl})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(context.Background(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	signals := &relaysignal.Relay{}
	for range 3 {
		runRoutedRelay(t, testdb.Pool(t, relayPoolSize), ob, 30*time.Second, signals, table.Stage(nil), sinks...)
	}
	for i := range perChannel {
		for _, ch := range channels {
			ev := outboxd.Event{Type: "alert.fired", Key: fmt.Sprintf("%s-%d", ch, i), Data: map[string]string{"channel": ch}}
			if _, err := ob.Publish(context.Background(), pool, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	signals.WaitWritten(t, time.Minute, "", "sent", 2*perChannel)
	byChannel := map[string][]time.Time{}
	for _, p := range fake.Posts() {
		byChannel[p.Channel] = append(byChannel[p.Channel], p.At)
	}
	for _, ch := range channels {
		times := byChannel[ch]
		if len(times) != perChannel {
			t.Fatalf("channel %s got %d posts, want %d", ch, len(times), perChannel)
		}
		if got := testrelay.MaxInWindow(times, time.Second); got > 2 {
			t.Errorf("channel %s got %d posts within one second; 1/s with a burst of 1 allows 2", ch, got)
		}
	}
	a, b := byChannel[channels[0]], byChannel[channels[1]]
	if !a[0].Before(b[perChannel-1]) || !b[0].Before(a[perChannel-1]) {
		t.Errorf("one channel waited for the other: %v..%v and %v..%v", a[0], a[perChannel-1], b[0], b[perChannel-1])
	}
	// Each channel's own limit spaces its posts over about perChannel-1
	// seconds (4 s); one limit for both channels would space all of them,
	// interleaved, over at least 2*perChannel-1 seconds (9 s).
	all := slices.SortedFunc(slices.Values(append(slices.Clone(a), b...)), time.Time.Compare)
	if span := all[len(all)-1].Sub(all[0]); span > 7*time.Second {
		t.Errorf("the two channels' posts took %s: they shared one limit", span)
	}
}
