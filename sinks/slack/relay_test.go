package slack_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// slackSink configures a slack sink instance against fake for a relay.
func slackSink(t *testing.T, fake *fakeslack.Server, rl *sink.RateLimit) relay.SinkConfig {
	return relay.SinkConfig{Name: testSinkName, Type: slack.Type.Name, Sink: newSink(t, tokenOptions(fake, nil)), RateLimit: rl}
}

func postTimes(posts []fakeslack.Message) []time.Time {
	times := make([]time.Time, len(posts))
	for i, p := range posts {
		times[i] = p.At
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return times
}

// Three relays sharing one outbox and a 2/s limit deliver at most 2+burst
// messages to Slack in any one-second window, and every message exactly once;
// three relays each holding the limit alone would post about 6.
//
// The fake sees arrival times, which a loaded machine delays unevenly (a
// late permit's post lands next to its successor's). Permits 500 ms apart
// keep that jitter from looking like a broken limit; at 5/s (200 ms) a
// heavily loaded run saw 7 posts in a window. (Mutation: a limiter row per
// relay instead of per sink posts 7 in a window.)
func TestThreeRelaysHoldTheRateLimit(t *testing.T) {
	t.Parallel()
	const messages = 24
	rl := sink.RateLimit{Rate: 2, Per: time.Second, Burst: 1}
	fake := newFake(t)
	pools := []*pgxpool.Pool{testdb.Pool(t, relayPoolSize), testdb.Pool(t, relayPoolSize), testdb.Pool(t, relayPoolSize)}
	ob := testdb.NewSchema(t, pools[0])
	signals := &relaysignal.Relay{}
	for _, pool := range pools {
		runRelay(t, pool, ob, 10*time.Second, signals, slackSink(t, fake, &rl))
	}
	enqueueTexts(t, pools[0], ob, testSinkName, messages)

	signals.WaitWritten(t, time.Minute, testSinkName, "sent", messages)
	if n := sentCount(t, pools[0], ob, testSinkName); n != messages {
		t.Fatalf("%d rows sent, want %d", n, messages)
	}
	posts := fake.Posts()
	keys := map[any]bool{}
	for _, p := range posts {
		keys[p.Metadata.EventPayload[slack.MetadataKeyDedup]] = true
	}
	if len(posts) != messages || len(keys) != messages {
		t.Fatalf("%d posts with %d distinct keys, want %d of each", len(posts), len(keys), messages)
	}
	times := postTimes(posts)
	most := testrelay.MaxInWindow(times, rl.Per)
	span := times[len(times)-1].Sub(times[0])
	t.Logf("%d posts over %s (%.2f/s), at most %d in any 1s window", len(times), span.Round(time.Millisecond),
		float64(len(times)-1)/span.Seconds(), most)
	if most > rl.Rate+rl.Burst {
		t.Errorf("%d posts in one %s window, want at most %d", most, rl.Per, rl.Rate+rl.Burst)
	}
}

// A 429 pauses the sink for every relay: no request reaches Slack before its
// Retry-After has passed.
//
// The sink runs at its default rate (Slack's 1/s). The pause reaches the
// other relays by NOTIFY, so at much higher rates a delivery another relay
// starts within that latency (tens of milliseconds) can still arrive after
// the 429; at 1/s the next permit is far beyond it. The next two permits,
// held by either relay, come one and two seconds after the 429, and a
// Retry-After of three seconds covers both, so a relay that ignored the
// pause would post inside the window. (Mutation: a pause kept only by the
// relay that got the 429 posts 1 or 2 s after it.)
func TestRetryAfterPausesEveryRelay(t *testing.T) {
	t.Parallel()
	const messages = 4
	const retryAfter = 3 * time.Second
	fake := newFake(t)
	fake.Inject(fakeslack.MethodPostMessage, fakeslack.Fault{Status: 429, RetryAfter: retryAfter})
	pools := []*pgxpool.Pool{testdb.Pool(t, relayPoolSize), testdb.Pool(t, relayPoolSize)}
	ob := testdb.NewSchema(t, pools[0])
	signals := &relaysignal.Relay{}
	for _, pool := range pools {
		runRelay(t, pool, ob, 10*time.Second, signals, slackSink(t, fake, nil))
	}
	ids := enqueueTexts(t, pools[0], ob, testSinkName, messages)

	signals.WaitWritten(t, time.Minute, testSinkName, "sent", messages)
	reqs := fake.Requests()
	if reqs[0].Status != 429 {
		t.Fatalf("first request answered %d, want the injected 429", reqs[0].Status)
	}
	resume := reqs[0].At.Add(retryAfter)
	for _, r := range reqs[1:] {
		if r.At.Before(resume) {
			t.Errorf("%s reached Slack %s after the 429, before its %s Retry-After passed",
				r.Method, r.At.Sub(reqs[0].At).Round(time.Millisecond), retryAfter)
		}
	}
	t.Logf("first request after the 429 came %s later", reqs[1].At.Sub(reqs[0].At).Round(time.Millisecond))
	if n := len(fake.Posts()); n != messages {
		t.Errorf("%d posts, want %d", n, messages)
	}
	for _, id := range ids {
		if r := readRow(t, pools[0], ob, id); r.Attempts != 1 {
			t.Errorf("row %d took %d attempts; a Retry-After must not spend one", id, r.Attempts)
		}
	}
}
