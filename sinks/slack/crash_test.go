package slack_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/crashchild"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// The crashing relay runs in a child process (this test binary re-executed)
// that reads its outbox schema and fake Slack URL from these variables.
const (
	crashChildSchemaEnv = "OUTBOXD_SLACK_CRASH_SCHEMA"
	crashChildAPIEnv    = "OUTBOXD_SLACK_CRASH_API_URL"
)

// crashLease is the lease of both relays: short, so the survivor takes the
// row over quickly.
const crashLease = 2 * time.Second

// A relay killed after Slack accepted a post but before the row was marked
// sent leaves exactly one Slack message: the relay that takes the row over
// finds the post in the channel's history and records its receipt.
// (Mutation: Deliver skipping the history check fails this test.)
func TestRelayKilledAfterPostDeliversOnce(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	pool, ob := testdb.New(t)
	id := enqueueTexts(t, pool, ob, testSinkName, 1)[0]

	crashchild.Run(t, "TestCrashingRelayChild", crashChildSchemaEnv+"="+ob.Schema(), crashChildAPIEnv+"="+fake.APIURL())
	first := fake.Posts()
	if len(first) != 1 {
		t.Fatalf("child posted %d messages, want 1", len(first))
	}
	if r := readRow(t, pool, ob, id); r.Status != string(status.InProgress) {
		t.Fatalf("after the crash the row is %s, want in_progress (posted, not recorded)", r.Status)
	}

	signals := &relaysignal.Relay{}
	runRelay(t, pool, ob, crashLease, signals, slackSink(t, fake, nil))
	signals.WaitWritten(t, 30*time.Second, testSinkName, "sent", 1) // the row taken over
	r := readRow(t, pool, ob, id)
	if r.Status != string(status.Sent) {
		t.Fatalf("the row taken over is %s, want sent", r.Status)
	}
	if posts := fake.Posts(); len(posts) != 1 {
		t.Errorf("Slack holds %d messages, want exactly 1", len(posts))
	}
	if r.Channel != first[0].Channel || r.TS != first[0].TS {
		t.Errorf("receipt %s/%s, want the first post's %s/%s", r.Channel, r.TS, first[0].Channel, first[0].TS)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n == 0 {
		t.Errorf("the surviving relay never read the channel history")
	}
}

// TestCrashingRelayChild is the child half of
// TestRelayKilledAfterPostDeliversOnce: a relay whose sink SIGKILLs its own
// process as soon as Slack has accepted a post.
func TestCrashingRelayChild(t *testing.T) {
	schema := os.Getenv(crashChildSchemaEnv)
	if schema == "" {
		t.Skip("run by TestRelayKilledAfterPostDeliversOnce in a child process")
	}
	ob := testdb.Open(t, schema)
	inner := newSink(t, map[string]any{"token": fakeslack.Token, "api_url": os.Getenv(crashChildAPIEnv), "channel": testChannel})
	signals := &relaysignal.Relay{}
	runRelay(t, testdb.Pool(t, relayPoolSize), ob, crashLease, signals, relay.SinkConfig{Name: testSinkName, Sink: killAfterPost{inner}})
	// The process dies inside the sink; an outcome written means the post
	// failed, and no outcome within the limit means it never happened.
	signals.Written.Wait(t, 30*time.Second, "the relay to post and die", func(all []relaysignal.Outcome) bool { return len(all) > 0 })
	t.Fatalf("the relay recorded %+v instead of dying after the post", signals.Written.All())
}

// killAfterPost is a Slack sink that SIGKILLs its process as soon as Slack
// accepted a post: the relay never gets to record it.
type killAfterPost struct{ *slack.Sink }

func (k killAfterPost) Deliver(ctx context.Context, d *sink.Delivery) error {
	err := k.Sink.Deliver(ctx, d)
	if err == nil {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return err
}
