package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/crashchild"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// The default rendering of a digest stays within Slack's limits however
// many members it has and however long their texts: at most 50 blocks,
// at most 3,000 characters per section, 40,000 in all, and a last line
// counting the members that did not fit. (Mutation: dropping the
// MaxBlocks check renders 1,001 blocks for 2,000 long members; dropping
// the "and N more" line loses the count.)
func TestDigestRenderingStaysWithinSlackLimits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é long line ", 400) // 4,800 characters, cut to one line's share
	for _, tc := range []struct {
		name     string
		members  int
		text     string
		wantMore bool
	}{
		{"few short", 3, "order 42 paid", false},
		{"many short", 2000, "order 42 paid", true},
		{"many long", 2000, long, true},
		{"one huge", 1, long, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			texts := make([]string, tc.members)
			for i := range texts {
				texts[i] = fmt.Sprintf("%d: %s", i, tc.text)
			}
			text, raw, err := slack.RenderDigest(texts)
			if err != nil {
				t.Fatal(err)
			}
			var blocks []struct {
				Type string `json:"type"`
				Text struct {
					Text string `json:"text"`
				} `json:"text"`
			}
			if err := json.Unmarshal(raw, &blocks); err != nil {
				t.Fatalf("blocks %s: %v", raw, err)
			}
			if len(blocks) > slack.MaxBlocks {
				t.Errorf("%d blocks, Slack takes at most %d", len(blocks), slack.MaxBlocks)
			}
			total := utf8.RuneCountInString(text)
			for i, b := range blocks {
				n := utf8.RuneCountInString(b.Text.Text)
				if n > slack.MaxSectionText {
					t.Errorf("block %d holds %d characters, Slack takes at most %d", i, n, slack.MaxSectionText)
				}
				total += n
			}
			if total > slack.MaxMessageText {
				t.Errorf("%d characters in all, Slack takes at most %d", total, slack.MaxMessageText)
			}
			if !strings.HasPrefix(blocks[0].Text.Text, fmt.Sprintf("*%d new message", tc.members)) {
				t.Errorf("header %q does not count the %d members", blocks[0].Text.Text, tc.members)
			}
			last := blocks[len(blocks)-1].Text.Text
			if got := strings.HasPrefix(last, "_and ") && strings.HasSuffix(last, " more_"); got != tc.wantMore {
				t.Errorf("last block %q: an \"and N more\" line is %v, want %v", last, got, tc.wantMore)
			}
			shown := 0
			for _, b := range blocks[1:] {
				shown += strings.Count(b.Text.Text, "• ")
			}
			if tc.wantMore {
				var more int
				fmt.Sscanf(last, "_and %d more_", &more)
				if shown+more != tc.members {
					t.Errorf("%d lines shown and %d more, want %d in all", shown, more, tc.members)
				}
			} else if shown != tc.members {
				t.Errorf("%d lines shown, want %d", shown, tc.members)
			}
		})
	}
}

// digestSink is the slack sink with a digest policy, against fake.
func digestSink(t *testing.T, fake *fakeslack.Server, window time.Duration, maxMessages int) relay.SinkConfig {
	sc := slackSink(t, fake, nil)
	sc.Digest = &sink.DigestPolicy{Window: window, MaxMessages: maxMessages}
	return sc
}

// enqueueAlerts enqueues n Slack texts "alert <first+i>" for the test
// sink in one statement.
func enqueueAlerts(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, first, n int) {
	t.Helper()
	msgs := make([]outboxd.Message, n)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: testSinkName, DedupKey: fmt.Sprintf("alert-%04d", first+i),
			Payload: map[string]string{"text": fmt.Sprintf("alert %d", first+i)}}
	}
	if _, err := ob.EnqueueBatch(context.Background(), pool, msgs); err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
}

// sentInDigests counts the delivered rows of ob and the digests they went
// out in.
func sentInDigests(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox) (rows, digests int) {
	t.Helper()
	err := pool.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT digest_id) FROM "+ob.Schema()+".messages_history").Scan(&rows, &digests)
	if err != nil {
		t.Fatal(err)
	}
	return rows, digests
}

// alertLines returns how often each "alert N" line appears in posts, and
// reports lines out of enqueue order within a post.
func alertLines(t *testing.T, posts []fakeslack.Message) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, p := range posts {
		var blocks []struct {
			Text struct {
				Text string `json:"text"`
			} `json:"text"`
		}
		if err := json.Unmarshal(p.Blocks, &blocks); err != nil {
			t.Fatalf("post %s: blocks %s: %v", p.TS, p.Blocks, err)
		}
		prev := -1
		for _, b := range blocks[1:] {
			for _, line := range strings.Split(b.Text.Text, "\n") {
				var n int
				if _, err := fmt.Sscanf(line, "• alert %d", &n); err != nil {
					t.Fatalf("post %s: line %q is not a member's", p.TS, line)
				}
				if n < prev {
					t.Errorf("post %s: alert %d after alert %d, want enqueue order", p.TS, n, prev)
				}
				prev = n
				seen[line]++
			}
		}
	}
	return seen
}

// A burst of 600 alerts to one channel, arriving over three seconds, at
// Slack's one post per second and a 10 s window, arrives in three posts of
// at most 200 lines (four at worst) within seconds of the window closing, not as a
// ten-minute queue: every alert is in exactly one post, in enqueue order,
// and every row is sent exactly once. (Mutation: windowLeft returning 0
// posts each 100-alert batch as it arrives, 6 posts; counting permits per
// member instead of per digest makes the burst take 600 s.)
func TestBurstArrivesInAFewDigests(t *testing.T) {
	t.Parallel()
	const (
		alerts  = 600
		batches = 6
		window  = 10 * time.Second
		most    = 200
	)
	fake := newFake(t)
	pool, ob := testdb.New(t)
	signals := &relaysignal.Relay{}
	runRelay(t, pool, ob, 30*time.Second, signals, digestSink(t, fake, window, most))
	start := time.Now()
	for b := range batches {
		enqueueAlerts(t, pool, ob, b*alerts/batches, alerts/batches)
		time.Sleep(500 * time.Millisecond) // the burst's arrival: part of the scenario, not a wait for the system
	}
	signals.WaitWritten(t, 2*time.Minute, testSinkName, "sent", alerts)
	took := time.Since(start)
	posts := fake.Posts()
	t.Logf("%d alerts arrived in %d posts, %s after the first was enqueued", alerts, len(posts), took.Round(time.Millisecond))
	// Three digests of 200; one more when a digest's members were gathered
	// while a claim held some of them (skipped, they go out in the next):
	// seen once on a loaded machine.
	if len(posts) < alerts/most || len(posts) > alerts/most+1 {
		t.Errorf("%d posts, want %d (digests of %d), or one more", len(posts), alerts/most, most)
	}
	seen := alertLines(t, posts)
	for i := range alerts {
		if n := seen[fmt.Sprintf("• alert %d", i)]; n != 1 {
			t.Errorf("alert %d is in %d posts, want 1", i, n)
		}
	}
	rows, digests := sentInDigests(t, pool, ob)
	if rows != alerts || digests != len(posts) {
		t.Errorf("%d rows sent in %d digests, want %d rows in %d", rows, digests, alerts, len(posts))
	}
	if limit := window + time.Minute; took > limit {
		t.Errorf("the burst took %s, want well under %s", took, limit)
	}
	if n := testrelay.MaxInWindow(postTimes(posts), time.Second); n > slack.DefaultRate+slack.DefaultBurst {
		t.Errorf("%d posts in one second, want at most %d: a digest is one delivery for the rate limit", n, slack.DefaultRate+slack.DefaultBurst)
	}
}

// The crashing digest relay runs in a child process that reads its
// outbox schema and fake Slack URL from these variables.
const (
	digestCrashSchemaEnv = "OUTBOXD_SLACK_DIGEST_CRASH_SCHEMA"
	digestCrashAPIEnv    = "OUTBOXD_SLACK_DIGEST_CRASH_API_URL"
)

// A relay SIGKILLed after Slack accepted a digest's post, before its
// members were marked sent, leaves one post: the relay that takes the
// members over regroups them by their recorded digest (not by a new
// window, which would make a digest of another id), finds the post by the
// digest's delivery id in the channel's history, and marks every member
// sent with its receipt. (Mutation: claim_digest_members.sql returning no
// rows posts a second digest; not recording the digest before the post
// posts a second one too.)
func TestRelayKilledInDigestPostPostsOnce(t *testing.T) {
	t.Parallel()
	const alerts = 20
	fake := newFake(t)
	pool, ob := testdb.New(t)
	enqueueAlerts(t, pool, ob, 0, alerts)

	crashchild.Run(t, "TestCrashingDigestRelayChild", digestCrashSchemaEnv+"="+ob.Schema(), digestCrashAPIEnv+"="+fake.APIURL())
	first := fake.Posts()
	if len(first) != 1 {
		t.Fatalf("child posted %d messages, want 1", len(first))
	}
	var recorded int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+ob.Schema()+".messages WHERE digest_id IS NOT NULL AND status = 'in_progress'").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != alerts {
		t.Fatalf("after the crash %d rows are in flight in a recorded digest, want %d", recorded, alerts)
	}

	signals := &relaysignal.Relay{}
	runRelay(t, pool, ob, crashLease, signals, digestSink(t, fake, 0, 50))
	signals.WaitWritten(t, 30*time.Second, testSinkName, "sent", alerts)
	if posts := fake.Posts(); len(posts) != 1 {
		t.Errorf("Slack holds %d posts, want exactly 1", len(posts))
	}
	rows, digests := sentInDigests(t, pool, ob)
	if rows != alerts || digests != 1 {
		t.Errorf("%d rows sent in %d digests, want %d in 1", rows, digests, alerts)
	}
	var ts string
	if err := pool.QueryRow(context.Background(), "SELECT min(receipt->>'ts') FROM "+ob.Schema()+".messages_history").Scan(&ts); err != nil || ts != first[0].TS {
		t.Errorf("members' receipt ts %q (%v), want the first post's %q", ts, err, first[0].TS)
	}
}

// TestCrashingDigestRelayChild is the child half of
// TestRelayKilledInDigestPostPostsOnce: a digest relay whose sink
// SIGKILLs its own process as soon as Slack has accepted a digest.
func TestCrashingDigestRelayChild(t *testing.T) {
	schema := os.Getenv(digestCrashSchemaEnv)
	if schema == "" {
		t.Skip("run by TestRelayKilledInDigestPostPostsOnce in a child process")
	}
	ob := testdb.Open(t, schema)
	inner := newSink(t, map[string]any{"token": fakeslack.Token, "api_url": os.Getenv(digestCrashAPIEnv), "channel": testChannel})
	signals := &relaysignal.Relay{}
	runRelay(t, testdb.Pool(t, relayPoolSize), ob, crashLease, signals,
		relay.SinkConfig{Name: testSinkName, Sink: killAfterDigest{inner}, Digest: &sink.DigestPolicy{MaxMessages: 50}})
	signals.Written.Wait(t, 30*time.Second, "the relay to post and die", func(all []relaysignal.Outcome) bool { return len(all) > 0 })
	t.Fatalf("the relay recorded %+v instead of dying after the post", signals.Written.All())
}

// killAfterDigest is a Slack sink that SIGKILLs its process as soon as
// Slack accepted a digest's post.
type killAfterDigest struct{ *slack.Sink }

func (k killAfterDigest) DeliverDigest(ctx context.Context, dg *sink.Digest) error {
	err := k.Sink.DeliverDigest(ctx, dg)
	if err == nil {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return err
}

// A routed Slack target with a digest keyed by the event's shop and a
// digest template posts one message per shop, rendered from the members'
// events at delivery: "20 new orders: A/A-00 ..." and "10 new orders: B/B-00 ...", the
// orders in publish order. (Mutation: PrepareDigest returning nil posts
// the default rendering; a key ignoring the template groups both shops
// into one post.)
func TestRoutedDigestRendersItsTemplatePerKey(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	pool, ob := testdb.New(t)
	inner := newSink(t, tokenOptions(fake, nil))
	// The sample declares the fields the digest template reads inside its
	// range, which a generated sample does not see.
	cfg, ps := routing.Parse(map[string]any{"orders": map[string]any{"events": []any{"order.paid"},
		"sample": map[string]any{"type": "order.paid", "data": map[string]any{"id": "A-00", "shop": "A"}},
		"to": []any{map[string]any{"sink": testSinkName, "template": map[string]any{"text": "{{.data.id}} paid"},
			"digest": map[string]any{"window": "1s", "key": "{{.data.shop}}",
				"template": map[string]any{"text": "{{len .messages}} new orders:{{range .messages}} {{.data.shop}}/{{.data.id}}{{end}}"}}}}}}, "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{testSinkName: inner})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(context.Background(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, shop := range []struct {
		name string
		n    int
	}{{"A", 20}, {"B", 10}} {
		ids := ""
		for i := range shop.n {
			id := fmt.Sprintf("%s-%02d", shop.name, i)
			ids += " " + shop.name + "/" + id
			ev := outboxd.Event{Type: "order.paid", Key: id, Data: map[string]string{"id": id, "shop": shop.name}}
			if _, err := ob.Publish(context.Background(), pool, ev); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, fmt.Sprintf("%d new orders:%s", shop.n, ids))
	}
	signals := &relaysignal.Relay{}
	sc := relay.SinkConfig{Name: testSinkName, Sink: inner, RouteDigests: table.RouteDigests(testSinkName)}
	runRoutedRelay(t, pool, ob, 30*time.Second, signals, table.Stage(nil), sc)
	signals.WaitWritten(t, 30*time.Second, testSinkName, "sent", 30)
	var got []string
	for _, p := range fake.Posts() {
		got = append(got, p.Text)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("posts %q, want %q", got, want)
	}
}
