package slack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

func TestDeliverPostsWithMetadataAndReceipt(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, map[string]any{"username": "outboxd", "icon_emoji": ":mailbox:"}))
	d := delivery(7, "order-7-shipped", `{"text":"Order 7 shipped"}`)
	if err := deliver(t, s, d); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	posts := fake.Posts()
	if len(posts) != 1 {
		t.Fatalf("fake recorded %d posts, want 1", len(posts))
	}
	p := posts[0]
	if p.Channel != testChannel || p.Text != "Order 7 shipped" || p.Username != "outboxd" || p.IconEmoji != ":mailbox:" {
		t.Errorf("post = %+v", p)
	}
	md := p.Metadata
	if md.EventType != slack.MetadataEventType ||
		md.EventPayload[slack.MetadataKeyDedup] != "order-7-shipped" ||
		md.EventPayload[slack.MetadataKeySink] != testSinkName ||
		md.EventPayload[slack.MetadataKeyID] != float64(7) {
		t.Errorf("metadata = %+v", md)
	}
	if got := receipt(t, d); got["channel"] != testChannel || got["ts"] != p.TS {
		t.Errorf("receipt = %v, want channel %s ts %s", got, testChannel, p.TS)
	}
	if n := countRequests(fake, fakeslack.MethodHistory); n != 0 {
		t.Errorf("a first attempt read history %d times", n)
	}
}

func TestDeliverPayloadFields(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	parent := fake.Seed(fakeslack.Message{Channel: "C0OTHER01", Text: "parent"})
	cases := []struct {
		name, payload string
		check         func(fakeslack.Message) bool
	}{
		{"blocks with fallback text",
			`{"text":"fallback","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"*hi*"}}]}`,
			func(m fakeslack.Message) bool {
				return m.Text == "fallback" && strings.Contains(string(m.Blocks), `"*hi*"`)
			}},
		{"blocks only",
			`{"blocks":[{"type":"divider"}]}`,
			func(m fakeslack.Message) bool { return m.Text == "" && strings.Contains(string(m.Blocks), "divider") }},
		{"channel and thread",
			`{"text":"reply","channel":"C0OTHER01","thread_ts":"` + parent.TS + `"}`,
			func(m fakeslack.Message) bool { return m.Channel == "C0OTHER01" && m.ThreadTS == parent.TS }},
		{"unfurl off",
			`{"text":"https://example.com","unfurl_links":false}`,
			func(m fakeslack.Message) bool { return m.UnfurlLinks == "false" }},
		{"unfurl on",
			`{"text":"https://example.com","unfurl_links":true}`,
			func(m fakeslack.Message) bool { return m.UnfurlLinks == "true" }},
	}
	for i, c := range cases {
		if err := deliver(t, s, delivery(int64(i), c.name, c.payload)); err != nil {
			t.Fatalf("%s: Deliver: %v", c.name, err)
		}
		posts := fake.Posts()
		if got := posts[len(posts)-1]; !c.check(got) {
			t.Errorf("%s: post = %+v", c.name, got)
		}
	}
}

func TestUndeliverablePayloadsArePermanent(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	noChannel := newSink(t, tokenOptions(fake, map[string]any{"channel": ""}))
	cases := []struct {
		name, payload, wantErr string
	}{
		{"not an object", `"hello"`, "payload"},
		{"empty", `{}`, "neither text nor blocks"},
		{"empty text", `{"text":""}`, "neither text nor blocks"},
		{"null blocks only", `{"blocks":null}`, "neither text nor blocks"},
		{"blocks not an array", `{"blocks":"nope"}`, "blocks"},
		{"block of unknown shape", `{"blocks":[{"type":7}]}`, "blocks"},
		{"typo in a field", `{"txt":"hello"}`, "txt"},
		{"@user with dedupe", `{"text":"x","channel":"@alice"}`, "DM's channel ID"},
	}
	for i, c := range cases {
		err := deliver(t, s, delivery(int64(i), c.name, c.payload))
		if outcome(err) != "permanent" || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: err = %v, want permanent mentioning %q", c.name, err, c.wantErr)
		}
	}
	err := deliver(t, noChannel, delivery(99, "no-channel", `{"text":"x"}`))
	if outcome(err) != "permanent" || !strings.Contains(err.Error(), "no channel") {
		t.Errorf("no channel anywhere: err = %v, want permanent", err)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("undeliverable payloads made %d requests", n)
	}
}

// TestErrorClasses checks each answer's class, and that an HTTP answer's
// error carries its status for the breaker (torture seed 4: a Slack 503
// on a row's last attempt killed it before the breaker opened). Mutation:
// classifyStatus without sink.HTTPStatus fails the 500, 503, 404, 429
// without Retry-After and 502 cases.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	permanent := []string{"channel_not_found", "not_in_channel", "invalid_auth", "account_inactive",
		"invalid_blocks", "msg_too_long", "is_archived", "no_text", "token_revoked"}
	type tc struct {
		name      string
		fault     fakeslack.Fault
		want      string
		wantDelay time.Duration
		// status is the HTTP status the error carries (sink.StatusCode),
		// which the relay's breaker reads to tell an outage from a
		// message's own failure; 0 is none.
		status int
	}
	cases := []tc{
		{name: "internal_error", fault: fakeslack.Fault{Error: "internal_error"}, want: "retry"},
		{name: "unknown error code", fault: fakeslack.Fault{Error: "something_new"}, want: "retry"},
		{name: "500", fault: fakeslack.Fault{Status: 500}, want: "retry", status: 500},
		{name: "503", fault: fakeslack.Fault{Status: 503}, want: "retry", status: 503},
		{name: "404 wrong api_url", fault: fakeslack.Fault{Status: 404}, want: "permanent", status: 404},
		{name: "429 with Retry-After", fault: fakeslack.Fault{Status: 429, RetryAfter: 7 * time.Second}, want: "retry_after", wantDelay: 7 * time.Second},
		{name: "429 without Retry-After", fault: fakeslack.Fault{Status: 429}, want: "retry_after", wantDelay: slack.DefaultRetryAfter, status: 429},
		{name: "ok:false ratelimited", fault: fakeslack.Fault{Error: "ratelimited"}, want: "retry_after", wantDelay: slack.DefaultRetryAfter},
		{name: "accepted, answer lost", fault: fakeslack.Fault{Accept: true, Status: 502}, want: "retry", status: 502},
	}
	for _, code := range permanent {
		cases = append(cases, tc{name: code, fault: fakeslack.Fault{Error: code}, want: "permanent"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t)
			s := newSink(t, tokenOptions(fake, nil))
			fake.Inject(fakeslack.MethodPostMessage, c.fault)
			d := delivery(1, "k", `{"text":"hi"}`)
			err := deliver(t, s, d)
			if got := outcome(err); got != c.want {
				t.Fatalf("outcome %s (%v), want %s", got, err, c.want)
			}
			if delay, _ := sink.RetryAfterDelay(err); delay != c.wantDelay {
				t.Errorf("retry after %s, want %s", delay, c.wantDelay)
			}
			if code, _ := sink.StatusCode(err); code != c.status {
				t.Errorf("the error carries HTTP status %d, want %d", code, c.status)
			}
			if !strings.Contains(err.Error(), testSinkName) || !strings.Contains(err.Error(), "chat.postMessage") {
				t.Errorf("error %q does not name the sink and call", err)
			}
			if d.Receipt() != nil {
				t.Errorf("failed delivery left receipt %s", d.Receipt())
			}
		})
	}
}

func TestTimeoutAndConnectionErrorsAreRetryable(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, tokenOptions(fake, nil))
	fake.Inject(fakeslack.MethodPostMessage, fakeslack.Fault{Delay: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Deliver(ctx, delivery(1, "slow", `{"text":"hi"}`)); outcome(err) != "retry" {
		t.Errorf("timeout: err = %v, want retryable", err)
	}

	s = newSink(t, tokenOptions(stoppedFake(), nil))
	if err := deliver(t, s, delivery(2, "down", `{"text":"hi"}`)); outcome(err) != "retry" {
		t.Errorf("connection refused: err = %v, want retryable", err)
	}
}

func TestWrongTokenIsPermanentAndNotEchoed(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	const secret = "xoxb-123-secret-value"
	s := newSink(t, tokenOptions(fake, map[string]any{"token": secret}))
	err := deliver(t, s, delivery(1, "k", `{"text":"hi"}`))
	if outcome(err) != "permanent" || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("err = %v, want permanent invalid_auth", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error echoes the token: %v", err)
	}
}
