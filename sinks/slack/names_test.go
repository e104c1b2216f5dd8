package slack_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// alertsID is the ID of the fake's #alerts channel (see namedFake).
const alertsID = "C0ALERTS01"

// namedFake is a fake knowing #alerts (public) and #ops (private) by name.
func namedFake(t *testing.T) *fakeslack.Server {
	t.Helper()
	fake := newFake(t)
	fake.AddChannel(fakeslack.Channel{ID: "C0OLD00001", Name: "alerts-old", Archived: true})
	fake.AddChannel(fakeslack.Channel{ID: alertsID, Name: "alerts"})
	fake.AddChannel(fakeslack.Channel{ID: "G0OPS00001", Name: "ops", Private: true})
	return fake
}

// A retry by the sink that made the first post resolves the name from that
// post's answer: no conversations.list.
func TestChannelNameLearnedFromPost(t *testing.T) {
	t.Parallel()
	fake := namedFake(t)
	s := newSink(t, tokenOptions(fake, map[string]any{"channel": "#alerts"}))
	d := delivery(1, "k1", `{"text":"hi"}`)
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	if got := receipt(t, d)["channel"]; got != alertsID {
		t.Errorf("receipt channel %q, want the ID %s", got, alertsID)
	}
	if err := deliver(t, s, retry(d)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := len(fake.Posts()); n != 1 {
		t.Errorf("posts = %d, want 1", n)
	}
	if n := countRequests(fake, fakeslack.MethodList); n != 0 {
		t.Errorf("conversations.list called %d times, want 0 (ID known from the post)", n)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n != 1 {
		t.Errorf("history read %d times, want 1", n)
	}
}

// The crash case: the process that posted is gone, a fresh sink retries the
// row and resolves the name with conversations.list. Names come from the
// option and from a payload's channel; the answer of the first post may even
// have been lost.
func TestChannelNameResolvedByListAfterCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, option, payload, wantID string
		lostAnswer                    bool
	}{
		{"option name", "#alerts", `{"text":"hi"}`, alertsID, false},
		{"payload name", testChannel, `{"text":"hi","channel":"#ops"}`, "G0OPS00001", false},
		{"bare name, lost answer", "alerts", `{"text":"hi"}`, alertsID, true},
	}
	for _, c := range cases {
		fake := namedFake(t)
		options := tokenOptions(fake, map[string]any{"channel": c.option})
		if c.lostAnswer {
			fake.Inject(fakeslack.MethodPostMessage, fakeslack.Fault{Accept: true, Status: 504})
		}
		d := delivery(1, "k1", c.payload)
		_ = deliver(t, newSink(t, options), d)
		if len(fake.Posts()) != 1 {
			t.Fatalf("%s: first attempt made %d posts", c.name, len(fake.Posts()))
		}

		survivor := newSink(t, options) // a new process: empty cache
		if err := deliver(t, survivor, retry(d)); err != nil {
			t.Fatalf("%s: retry: %v", c.name, err)
		}
		posts := fake.Posts()
		if len(posts) != 1 {
			t.Errorf("%s: %d posts, want no second post", c.name, len(posts))
		}
		if r := receipt(t, d); r["channel"] != c.wantID || r["ts"] != posts[0].TS || r[slack.ReceiptDedupeSkipped] != "" {
			t.Errorf("%s: receipt %v, want the first post in %s", c.name, r, c.wantID)
		}
		if n := countRequests(fake, fakeslack.MethodList); n != 1 {
			t.Errorf("%s: conversations.list called %d times, want 1", c.name, n)
		}
	}
}

func TestChannelListScanPaginates(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	for i := range slack.ChannelListPageSize + 10 {
		fake.AddChannel(fakeslack.Channel{ID: fmt.Sprintf("C%08d", i), Name: fmt.Sprintf("chatter-%d", i)})
	}
	fake.AddChannel(fakeslack.Channel{ID: alertsID, Name: "alerts"})
	s := newSink(t, tokenOptions(fake, map[string]any{"channel": "#alerts"}))
	seeded := fake.Seed(earlierPost(alertsID, "k1"))
	d := retry(delivery(1, "k1", `{"text":"hi"}`))
	d.CreatedAt = time.Now().Add(-time.Second)
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := countRequests(fake, fakeslack.MethodList); n != 2 {
		t.Errorf("conversations.list pages: %d, want 2", n)
	}
	if len(fake.Posts()) != 0 || receipt(t, d)["ts"] != seeded.TS {
		t.Errorf("posts %d, receipt %v: want the earlier post found", len(fake.Posts()), receipt(t, d))
	}
}

// A name that cannot be resolved does not make the row fail on its own: it
// is posted without the check, and the receipt says so. A transient list
// failure is retried without posting.
func TestUnresolvableChannelName(t *testing.T) {
	t.Parallel()
	fake := namedFake(t)
	s := newSink(t, tokenOptions(fake, map[string]any{"channel": "#alerts"}))

	fake.Inject(fakeslack.MethodList, fakeslack.Fault{Status: 503})
	if err := deliver(t, s, retry(delivery(1, "k1", `{"text":"hi"}`))); outcome(err) != "retry" {
		t.Errorf("503 on conversations.list: %v, want retry", err)
	}
	if n := len(fake.Posts()); n != 0 {
		t.Errorf("posted %d times after a transient list failure", n)
	}

	fake.Inject(fakeslack.MethodList, fakeslack.Fault{Error: "missing_scope"})
	d := retry(delivery(2, "k2", `{"text":"hi"}`))
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("missing_scope on conversations.list: %v, want posted", err)
	}
	if r := receipt(t, d); r["channel"] != alertsID || !strings.Contains(r[slack.ReceiptDedupeSkipped], "missing_scope") {
		t.Errorf("receipt %v, want %s and a dedupe_skipped naming missing_scope", r, alertsID)
	}

	// Archived and unknown channels are not listed; posting then tells
	// whether the channel exists.
	for name, want := range map[string]string{"#alerts-old": "is_archived", "#nowhere": "channel_not_found"} {
		err := deliver(t, s, retry(delivery(3, "k3", `{"text":"hi","channel":"`+name+`"}`)))
		if outcome(err) != "permanent" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want permanent %s from the post", name, err, want)
		}
	}
	if n := len(fake.Posts()); n != 1 {
		t.Errorf("posts = %d, want 1", n)
	}
}

// Many retried rows to names at once: one scan serves all (the cache is
// shared and filled with every listed channel). Run with -race.
func TestChannelCacheConcurrent(t *testing.T) {
	t.Parallel()
	fake := namedFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	const rows = 32
	var wg sync.WaitGroup
	errs := make([]error, rows)
	ds := make([]*sink.Delivery, rows)
	for i := range rows {
		channel := []string{"#alerts", "#ops"}[i%2]
		ds[i] = retry(delivery(int64(i), fmt.Sprint("k", i), `{"text":"hi","channel":"`+channel+`"}`))
		wg.Go(func() { errs[i] = deliver(t, s, ds[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("row %d: %v", i, err)
		} else if want := []string{alertsID, "G0OPS00001"}[i%2]; receipt(t, ds[i])["channel"] != want {
			t.Errorf("row %d: receipt %v, want channel %s", i, receipt(t, ds[i]), want)
		}
	}
	if n := countRequests(fake, fakeslack.MethodList); n != 1 {
		t.Errorf("conversations.list called %d times for %d concurrent rows, want 1", n, rows)
	}
	if n := len(fake.Posts()); n != rows {
		t.Errorf("posts = %d, want %d", n, rows)
	}
}

// The warning that a post goes without the duplicate check is written
// through the sink's environment's logger, naming the sink, the row and
// the channel. (Mutation: the warning through slog's default logger fails
// this test.)
func TestPostWithoutTheCheckWarnsThroughTheEnvironment(t *testing.T) {
	t.Parallel()
	fake := namedFake(t)
	var logged bytes.Buffer
	s := newSinkIn(t, tokenOptions(fake, map[string]any{"channel": "#alerts"}),
		sink.Env{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	fake.Inject(fakeslack.MethodList, fakeslack.Fault{Error: "missing_scope"})
	if err := deliver(t, s, retry(delivery(4, "k4", `{"text":"hi"}`))); err != nil {
		t.Fatalf("missing_scope on conversations.list: %v, want posted", err)
	}
	want := `level=WARN msg="slack sink posts without the duplicate check" sink=` + testSinkName + ` row=4 channel=#alerts`
	if !strings.Contains(logged.String(), want) {
		t.Errorf("logged %q; want %q", logged.String(), want)
	}
}
