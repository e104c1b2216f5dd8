package faults_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// crashLease is the lease of the relay whose database crashes: the row
// comes back when it runs out.
const crashLease = 3 * time.Second

// PostgreSQL crashes (pg_ctl stop -m immediate) right after the fake Slack
// accepted a post, while the relay's claim of the row is the last thing it
// wrote; the relay's connections commit asynchronously (the default). After
// the restart the row comes back Uncertain, the Slack sink finds its post
// in the channel's history, and Slack ends with one post. The WAL writer is
// slowed down (wal_writer_delay 10s) so that an asynchronous commit of the
// claim would still sit unwritten in WAL buffers at the crash, as it may
// under load.
// (Mutation: claim.sql without its synchronous_commit filter fails this
// test: the claim is lost, the row comes back as a fresh first attempt,
// and Slack holds 2 posts. So does the Slack sink's ChecksUncertain
// answering false, which leaves its claims asynchronous: 2 posts, seen.)
func TestPostgresCrashAfterSlackPostDeliversOnce(t *testing.T) {
	t.Parallel()
	pg := pgcluster.New(t)
	pg.Configure("wal_writer_delay = 10s", "wal_writer_flush_after = 0", "autovacuum = off")
	pg.Start()
	ctx := t.Context()
	pool := pg.Pool(2)
	ob := testdb.Open(t, "crash")
	if _, err := ob.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	fake := fakeslack.New()
	t.Cleanup(fake.Close)
	// The post is recorded, and its answer held back past the crash.
	fake.Inject(fakeslack.MethodPostMessage, fakeslack.Fault{Accept: true, Delay: 30 * time.Second})
	slackSink, err := slack.Type.New("ops", map[string]any{"token": fakeslack.Token, "api_url": fake.APIURL(), "channel": "C0CRASH01"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "ops", DedupKey: "incident-1", Payload: map[string]string{"text": "DB down"}}); err != nil {
		t.Fatal(err)
	}

	signals := testrelay.Run(t, pg.Pool(4), ob.Schema(), relay.Config{Lease: crashLease, PollInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "ops", Sink: slackSink, MaxAttempts: 10, Backoff: relay.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}}}})
	if posts := fake.WaitPosts(1, 30*time.Second); len(posts) != 1 {
		t.Fatalf("Slack got %d posts, want the first", len(posts))
	}
	pg.Crash()
	pg.Start()

	signals.WaitWritten(t, 60*time.Second, "ops", "sent", 1)
	if posts := fake.Posts(); len(posts) != 1 {
		t.Errorf("Slack holds %d posts, want exactly 1: %+v", len(posts), posts)
	}
	var status string
	var attempts int
	if err := pool.QueryRow(ctx, "SELECT status, attempts FROM crash.messages_all WHERE dedup_key = 'incident-1'").Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "sent" || attempts < 2 {
		t.Errorf("the row is %s after %d attempts, want sent after the crashed attempt and a retry", status, attempts)
	}
}
