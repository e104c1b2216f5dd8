package mattermost_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/mattermost"
	"github.com/outboxd/outboxd/sinks/mattermost/fakemattermost"
)

// A post carries the text, the sink's username and icon, the channel (the
// payload's over the option's) and the delivery id in its props.
// Mutation: dropping the props makes the ids check fail.
func TestDeliverPostsToTheWebhook(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.AddChannel("ops")
	fake.AddChannel("deploys")
	s := build(t, "chat", fake.HookURL(fakemattermost.Hook), map[string]any{"channel": "ops", "username": "outboxd", "icon_url": "https://example.com/i.png"})
	if err := s.Deliver(t.Context(), delivery("deploy-42", `{"text": "Deploy 42 <finished> & **green**"}`)); err != nil {
		t.Fatal(err)
	}
	attachments := `[{"fallback":"Build 17 failed","color":"#FF0000","title":"Build 17","fields":[{"title":"stage","value":"test","short":true}]}]`
	if err := s.Deliver(t.Context(), delivery("build-17", `{"attachments": `+attachments+`, "channel": "deploys"}`)); err != nil {
		t.Fatal(err)
	}
	posts := fake.Posts()
	if len(posts) != 2 {
		t.Fatalf("%d posts, want 2", len(posts))
	}
	if p := posts[0]; p.Channel != "ops" || p.Text != "Deploy 42 <finished> & **green**" || p.Username != "outboxd" || p.IconURL != "https://example.com/i.png" {
		t.Errorf("first post %+v", p)
	}
	if p := posts[1]; p.Channel != "deploys" || p.Text != "" || string(p.Attachments) != attachments {
		t.Errorf("second post %+v", p)
	}
	if ids := deliveryIDs(fake); !slices.Equal(ids, []string{"chat/deploy-42", "chat/build-17"}) {
		t.Errorf("delivery ids %q", ids)
	}
}

// Payloads Mattermost would refuse fail permanently before any request.
// Mutation: dropping the check for neither text nor attachments sends
// the empty post (the fake's 400 is permanent too, but a request: the
// count fails).
func TestBadPayloadsFailPermanentlyWithoutARequest(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := build(t, "chat", fake.HookURL(fakemattermost.Hook), nil)
	for name, payload := range map[string]string{
		"not an object":          `"hello"`,
		"unknown field":          `{"text": "x", "blocks": []}`,
		"empty":                  `{}`,
		"empty attachments":      `{"attachments": []}`,
		"attachments not a list": `{"attachments": {"text": "x"}}`,
		"attachment not objects": `{"attachments": ["x"]}`,
	} {
		if err := s.Deliver(t.Context(), delivery("bad", payload)); !sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("%d requests reached Mattermost, want none", n)
	}
}

// Mattermost's own refusals are permanent, and errors never show the
// hook's key: an unknown hook (400), a channel it does not know (404), a
// locked hook asked for another channel (403).
func TestMattermostRefusalsArePermanent(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.AddHook("lockedhookkey", "ops", true)
	for name, tc := range map[string]struct {
		key, payload string
		status       int
	}{
		"unknown hook":    {"deletedhookkey", `{"text": "x"}`, http.StatusBadRequest},
		"unknown channel": {fakemattermost.Hook, `{"text": "x", "channel": "nowhere"}`, http.StatusNotFound},
		"locked hook":     {"lockedhookkey", `{"text": "x", "channel": "town-square"}`, http.StatusForbidden},
	} {
		err := build(t, "chat", fake.HookURL(tc.key), nil).Deliver(t.Context(), delivery("k", tc.payload))
		if !sink.IsPermanent(err) {
			t.Errorf("%s: %v, want permanent", name, err)
			continue
		}
		if code, _ := sink.StatusCode(err); code != tc.status {
			t.Errorf("%s: status %d, want %d", name, code, tc.status)
		}
		if strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: the error shows the hook's key: %v", name, err)
		}
	}
	if n := len(fake.Posts()); n != 0 {
		t.Errorf("%d posts kept, want none", n)
	}
}

// With Mattermost's rate limiter on, a request past the bucket gets 429
// with Retry-After in seconds: sink.RetryAfter with that wait.
// Mutation: the fake not sending Retry-After (X-RateLimit-Reset alone)
// leaves a plain retryable error and fails this test.
func TestThrottledPostAsksToComeBackLater(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.Limit(1, 2) // a second's refill is far slower than requests in a row
	s := build(t, "chat", fake.HookURL(fakemattermost.Hook), nil)
	var err error
	// Three requests empty the bucket unless the machine takes a second
	// between them; a few more make sure of it.
	for i := 0; i < 20 && err == nil; i++ {
		err = s.Deliver(t.Context(), delivery("k", `{"text": "x"}`))
	}
	if d, ok := sink.RetryAfterDelay(err); !ok || d != time.Second {
		t.Fatalf("%v: RetryAfterDelay %s %v, want 1s", err, d, ok)
	}
	if fake.Throttled() != 1 {
		t.Errorf("the fake throttled %d requests, want 1", fake.Throttled())
	}
}

// A success that is not Mattermost's "ok" (the URL leads to another
// application) fails permanently, naming what was answered.
func TestSuccessWithoutOKIsPermanent(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<html>login</html>"))
	}))
	t.Cleanup(other.Close)
	err := build(t, "chat", other.URL+"/hooks/k", nil).Deliver(t.Context(), delivery("k", `{"text": "x"}`))
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "login") {
		t.Fatalf("%v, want a permanent error showing the answer", err)
	}
}

// The sink's default rate limit keeps within Mattermost's default: 10
// requests a second with a burst of 100.
func TestDefaultRateLimitKeepsWithinMattermostsLimit(t *testing.T) {
	t.Parallel()
	s := build(t, "chat", "https://mattermost.example.com/hooks/k", nil)
	rl := s.(sink.RateLimitDefaulter).DefaultRateLimit()
	if perSecond := float64(rl.Rate) * float64(time.Second) / float64(rl.Per); perSecond > 10 || rl.Burst > 100 {
		t.Errorf("%+v allows %.0f a second", rl, perSecond)
	}
}

// Bad options are refused with errors naming the option, never the URL.
func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]map[string]any{
		"no url":       {},
		"ftp url":      {"url": "ftp://secret-host/hooks/s3cret"},
		"bad icon":     {"url": "https://example.com/hooks/s3cret", "icon_url": "icon.png"},
		"zero timeout": {"url": "https://example.com/hooks/s3cret", "timeout": "0s"},
	} {
		_, err := mattermost.Type.New("chat", opts, sink.Env{})
		if err == nil || !strings.Contains(err.Error(), "option ") {
			t.Errorf("%s: %v, want an error naming the option", name, err)
			continue
		}
		if strings.Contains(err.Error(), "secret-host") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the URL: %v", name, err)
		}
	}
}

// A target without a template posts the event's type, key and data.
func TestUntemplatedEventIsPosted(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	payload, err := mattermost.Shape().Untemplated(sink.Event{Type: "order.created", Key: "42", Data: []byte(`{"total":9}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := build(t, "chat", fake.HookURL(fakemattermost.Hook), nil).Deliver(t.Context(), delivery("e", string(payload))); err != nil {
		t.Fatal(err)
	}
	if posts := fake.Posts(); len(posts) != 1 || posts[0].Text != "**order.created** 42\n```json\n{\"total\":9}\n```" {
		t.Errorf("posts %+v", posts)
	}
}

// With allow_private false the SSRF guard refuses a loopback server,
// permanently and without a request.
// Mutation: not passing AllowPrivate to the client delivers the message.
func TestAllowPrivateFalseRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := build(t, "chat", fake.HookURL(fakemattermost.Hook), map[string]any{"allow_private": false})
	if err := s.Deliver(t.Context(), delivery("k", `{"text": "x"}`)); !sink.IsPermanent(err) {
		t.Errorf("%v, want a permanent refusal", err)
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("%d requests reached the fake, want none", n)
	}
}
