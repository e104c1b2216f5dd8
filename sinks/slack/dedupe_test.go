package slack_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// earlierPost is a message an earlier attempt at (testSinkName, key) left in
// channel.
func earlierPost(channel, key string) fakeslack.Message {
	return fakeslack.Message{Channel: channel, Text: "earlier", Metadata: fakeslack.Metadata{
		EventType:    slack.MetadataEventType,
		EventPayload: map[string]any{slack.MetadataKeySink: testSinkName, slack.MetadataKeyDedup: key},
	}}
}

// A retry finds its earlier post in the channel's history, records it and
// posts nothing. (Mutation: Deliver skipping the history check fails this
// test and TestRelayKilledAfterPostDeliversOnce.)
func TestRetryFindsEarlierPostAndDoesNotPostAgain(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	d := delivery(1, "k1", `{"text":"hi"}`)
	d.CreatedAt = time.Now().Add(-time.Second)
	seeded := fake.Seed(earlierPost(testChannel, "k1"))

	if err := deliver(t, s, retry(d)); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := len(fake.Posts()); n != 0 {
		t.Errorf("posted %d times although the earlier post was in history", n)
	}
	if got := receipt(t, d); got["ts"] != seeded.TS || got["channel"] != testChannel {
		t.Errorf("receipt = %v, want the earlier post's ts %s", got, seeded.TS)
	}
}

func TestRetryPostsWhenHistoryHasNoPost(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	fake.Seed(earlierPost(testChannel, "another-key"))
	fake.Seed(fakeslack.Message{Channel: testChannel, Text: "no metadata"})
	other := earlierPost(testChannel, "k1")
	other.Metadata.EventPayload[slack.MetadataKeySink] = "another-sink"
	fake.Seed(other)

	d := retry(delivery(1, "k1", `{"text":"hi"}`))
	d.Uncertain = false // Attempt > 1 alone also triggers the check
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n != 1 {
		t.Errorf("history read %d times, want 1", n)
	}
	if posts := fake.Posts(); len(posts) != 1 || receipt(t, d)["ts"] != posts[0].TS {
		t.Errorf("posts = %v, receipt %v: want one post recorded as the receipt", posts, receipt(t, d))
	}
}

// A post Slack accepted whose answer was lost is found by the next attempt.
func TestLostAnswerThenRetryPostsOnce(t *testing.T) {
	t.Parallel()
	for _, thread := range []bool{false, true} {
		fake := newFake(t)
		s := newSink(t, tokenOptions(fake, nil))
		payload := `{"text":"hi"}`
		if thread {
			parent := fake.Seed(fakeslack.Message{Channel: testChannel, Text: "parent"})
			// Replies are not in conversations.history: the lookup must
			// read the thread.
			payload = `{"text":"hi","thread_ts":"` + parent.TS + `"}`
		}
		fake.Inject(fakeslack.MethodPostMessage, fakeslack.Fault{Accept: true, Status: 504})
		d := delivery(1, "k1", payload)
		if err := deliver(t, s, d); outcome(err) != "retry" {
			t.Fatalf("thread=%v: first attempt: %v, want retryable", thread, err)
		}
		if err := deliver(t, s, retry(d)); err != nil {
			t.Fatalf("thread=%v: second attempt: %v", thread, err)
		}
		posts := fake.Posts()
		if len(posts) != 1 || receipt(t, d)["ts"] != posts[0].TS {
			t.Errorf("thread=%v: %d posts, receipt %v: want exactly the first post", thread, len(posts), receipt(t, d))
		}
	}
}

func TestHistoryLookupPaginates(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	target := fake.Seed(earlierPost(testChannel, "k1"))
	for range 2*slack.HistoryPageSize + 50 {
		fake.Seed(fakeslack.Message{Channel: testChannel, Text: "chatter"})
	}
	d := retry(delivery(1, "k1", `{"text":"hi"}`))
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n != 3 {
		t.Errorf("history pages read: %d, want 3", n)
	}
	if len(fake.Posts()) != 0 || receipt(t, d)["ts"] != target.TS {
		t.Errorf("posts %d, receipt %v: want the old post found on page 3", len(fake.Posts()), receipt(t, d))
	}
}

// The lookup only reads history since the row was created (less the skew
// margin): a post of the same key from before that is someone else's.
func TestHistoryLookupStartsAtRowCreation(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	fake.Seed(earlierPost(testChannel, "k1"))
	d := retry(delivery(1, "k1", `{"text":"hi"}`))
	d.CreatedAt = time.Now().Add(slack.HistorySkew + time.Minute)
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := len(fake.Posts()); n != 1 {
		t.Errorf("posts = %d, want 1: a post older than the row must not count", n)
	}
}

func TestHistoryLookupErrorsAreClassified(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	fake.Inject(fakeslack.MethodHistory,
		fakeslack.Fault{Status: 429, RetryAfter: 3 * time.Second},
		fakeslack.Fault{Error: "missing_scope"})
	if err := deliver(t, s, retry(delivery(1, "k1", `{"text":"hi"}`))); outcome(err) != "retry_after" {
		t.Errorf("429 on history: %v, want retry_after", err)
	}
	if err := deliver(t, s, retry(delivery(1, "k1", `{"text":"hi"}`))); outcome(err) != "permanent" {
		t.Errorf("missing_scope on history: %v, want permanent", err)
	}
	if n := len(fake.Posts()); n != 0 {
		t.Errorf("posted %d times without a successful lookup", n)
	}
}

func TestNoLookupOnFirstAttemptOrWithDedupeOff(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	on := newSink(t, tokenOptions(fake, nil))
	off := newSink(t, tokenOptions(fake, map[string]any{"dedupe": false}))
	fake.Seed(earlierPost(testChannel, "k1"))
	if err := deliver(t, on, delivery(1, "k1", `{"text":"first attempt"}`)); err != nil {
		t.Fatal(err)
	}
	if err := deliver(t, off, retry(delivery(1, "k1", `{"text":"dedupe off"}`))); err != nil {
		t.Fatal(err)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n != 0 {
		t.Errorf("history read %d times", n)
	}
	if n := len(fake.Posts()); n != 2 {
		t.Errorf("posts = %d, want 2", n)
	}
}
