package discord_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/sinks/discord"
	"github.com/outboxd/outboxd/sinks/discord/fakediscord"
)

// A plain-text row ({"text": ...}, what `enqueue --text` stores) is posted
// as the message's content, with allowed_mentions {"parse": []}: a
// producer's @everyone pings no one. The receipt names Discord's message.
// (Mutation: leaving allowed_mentions out of the request, which makes
// Discord parse every mention, fails this test.)
func TestDeliverPostsWithoutMentions(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, "ops", fake.URL(), map[string]any{"username": "outboxd"})
	d := delivery("k1", `{"text": "deploy done @everyone"}`)
	if err := s.Deliver(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	msgs := fake.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Content != "deploy done @everyone" || m.Username != "outboxd" {
		t.Errorf("posted %q as %q, want the text as outboxd", m.Content, m.Username)
	}
	if m.AllowedMentions == nil || len(m.AllowedMentions) != 0 {
		t.Errorf("allowed_mentions.parse %v, want [] (no mention pings anyone)", m.AllowedMentions)
	}
	if r := receipt(t, d); r.ID != m.ID || r.ChannelID != fakediscord.ChannelID || r.ThreadID != "" {
		t.Errorf("receipt %+v, want message %s in channel %s", r, m.ID, fakediscord.ChannelID)
	}

	// The option widens it; a payload cannot (allowed_mentions is not a
	// payload field).
	everyone := newSink(t, "ops", fake.URL(), map[string]any{"allowed_mentions": []any{"everyone"}})
	if err := everyone.Deliver(t.Context(), delivery("k2", `{"content": "@everyone"}`)); err != nil {
		t.Fatal(err)
	}
	if got := fake.Messages()[1].AllowedMentions; len(got) != 1 || got[0] != "everyone" {
		t.Errorf("allowed_mentions.parse %v, want [everyone]", got)
	}
	err := s.Deliver(t.Context(), delivery("k3", `{"content": "@everyone", "allowed_mentions": {"parse": ["everyone"]}}`))
	if !sink.IsPermanent(err) {
		t.Errorf("a payload setting allowed_mentions: %v, want a permanent error", err)
	}
}

// Bad input fails permanently: what the sink can tell from the payload
// before sending (nothing reaches Discord), and what only Discord refuses,
// by its answer: 400 with its JSON code, 404 for an unknown webhook, 401
// for a wrong token. A 5xx is retried. (Mutation: classifying 4xx as
// retryable fails the Discord-refused cases; dropping the local checks
// sends the first cases to the fake, which counts them.)
func TestBadInputFailsPermanently(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, "ops", fake.URL(), nil)
	local := map[string]string{
		"empty":          `{"content": ""}`,
		"unknown field":  `{"content": "x", "colour": 1}`,
		"content > 2000": `{"content": "` + strings.Repeat("é", discord.MaxContentRunes+1) + `"}`,
		"11 embeds":      `{"embeds": [` + strings.Repeat(`{"title": "t"},`, discord.MaxEmbeds) + `{"title": "t"}]}`,
		"embeds object":  `{"embeds": {"title": "t"}}`,
		"username":       `{"content": "x", "username": "Discord Bot"}`,
		"thread both":    `{"content": "x", "thread_id": "1", "thread_name": "t"}`,
		"thread id":      `{"content": "x", "thread_id": "general"}`,
		"content+text":   `{"content": "x", "text": "y"}`,
	}
	for name, payload := range local {
		if err := s.Deliver(t.Context(), delivery(name, payload)); !sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("%d requests reached Discord for payloads the sink can refuse itself", n)
	}

	longTitle := `{"embeds": [{"title": "` + strings.Repeat("t", 300) + `"}]}`
	if err := s.Deliver(t.Context(), delivery("title", longTitle)); !sink.IsPermanent(err) || !strings.Contains(err.Error(), "50035") {
		t.Errorf("an embed title Discord refuses: %v, want a permanent error with code 50035", err)
	}
	unknown := newSink(t, "ops", strings.Replace(fake.URL(), fakediscord.WebhookID, "1999", 1), nil)
	if err := unknown.Deliver(t.Context(), delivery("unknown", `{"content": "x"}`)); !sink.IsPermanent(err) || !strings.Contains(err.Error(), "10015") {
		t.Errorf("an unknown webhook: %v, want a permanent error with code 10015", err)
	}
	wrongToken := newSink(t, "ops", strings.Replace(fake.URL(), fakediscord.Token, "stolen", 1), nil)
	err := wrongToken.Deliver(t.Context(), delivery("token", `{"content": "x"}`))
	if !sink.IsPermanent(err) || strings.Contains(err.Error(), "stolen") {
		t.Errorf("a wrong token: %v, want a permanent error that does not quote the token", err)
	}

	fake.Inject(fakediscord.Fault{Status: 502})
	err = s.Deliver(t.Context(), delivery("5xx", `{"content": "x"}`))
	if err == nil || sink.IsPermanent(err) {
		t.Errorf("a 502: %v, want a retryable error", err)
	}
	if code, _ := sink.StatusCode(err); code != 502 {
		t.Errorf("a 502's error carries status %d, want 502 for the breaker", code)
	}
	if n := len(fake.Messages()); n != 0 {
		t.Errorf("%d messages posted, want none", n)
	}
}

// The sink follows Discord's rate limits as Discord states them: a 429's
// wait is its body's retry_after, seconds with a fraction (not the
// Retry-After header's whole seconds), and once the headers say the bucket
// is empty the sink sends nothing until it refills. (Mutations: ignoring
// the body's retry_after makes the first checks wait DefaultRetryAfter;
// not keeping the bucket sends the held-back delivery to the fake.)
func TestRateLimitsAsDiscordSendsThem(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, "ops", fake.URL(), nil)

	fake.Inject(fakediscord.Fault{Status: 429, Body: `{"message": "You are being rate limited.", "retry_after": 0.75, "global": false}`})
	err := s.Deliver(t.Context(), delivery("a", `{"content": "a"}`))
	if d, ok := sink.RetryAfterDelay(err); !ok || d != 750*time.Millisecond {
		t.Errorf("a 429 with retry_after 0.75: %v, want sink.RetryAfter 750ms", err)
	}
	// Another sink: this one holds back until the first 429's wait passed.
	fake.Inject(fakediscord.Fault{Status: 429, Body: `{"message": "You are being rate limited.", "retry_after": 1.5, "global": true}`})
	err = newSink(t, "ops", fake.URL(), nil).Deliver(t.Context(), delivery("b", `{"content": "b"}`))
	if d, ok := sink.RetryAfterDelay(err); !ok || d != 1500*time.Millisecond || !strings.Contains(err.Error(), "global") {
		t.Errorf("a global 429: %v, want sink.RetryAfter 1.5s naming the global limit", err)
	}

	// The fake's own bucket: 2 requests per 1.5 s (Retry-After rounds
	// that up to 2 s).
	const window = 1500 * time.Millisecond
	fake.SetLimit(2, window)
	fresh := newSink(t, "ops", fake.URL(), nil)
	for _, key := range []string{"c", "d"} {
		if err := fresh.Deliver(t.Context(), delivery(key, `{"content": "x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	sent := len(fake.Requests())
	err = fresh.Deliver(t.Context(), delivery("e", `{"content": "x"}`))
	if d, ok := sink.RetryAfterDelay(err); !ok || d <= 0 || d > window {
		t.Errorf("with the bucket empty: %v, want sink.RetryAfter of at most %s", err, window)
	}
	if n := len(fake.Requests()); n != sent {
		t.Errorf("%d requests reached Discord while its bucket was empty, want none", n-sent)
	}
	// Another sink, which has not seen the headers, gets Discord's 429.
	err = newSink(t, "ops", fake.URL(), nil).Deliver(t.Context(), delivery("f", `{"content": "x"}`))
	if d, ok := sink.RetryAfterDelay(err); !ok || d <= 0 || d > window {
		t.Errorf("the fake's 429: %v, want sink.RetryAfter of at most %s (its retry_after)", err, window)
	}
	// When the bucket refills, the held-back delivery goes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fresh.Deliver(t.Context(), delivery("e", `{"content": "x"}`))
		if err == nil {
			break
		}
		d, ok := sink.RetryAfterDelay(err)
		if !ok || time.Now().After(deadline) {
			t.Fatalf("after the bucket's reset: %v", err)
		}
		time.Sleep(d) // the wait Discord announced, as the relay would
	}
}

// Threads: in a forum channel a row with thread_name creates a thread,
// and a later row of the same thread (its ThreadRoot the first row's
// receipt) posts into it, its update_root first editing the first message.
// In a text channel Discord refuses thread_name (220003), and an unknown
// thread_id is 404: both permanent. (Mutation: ignoring ThreadRoot posts
// the reply without thread_id, which the forum refuses with 220001.)
func TestThreads(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := newSink(t, "ops", fake.URL(), nil)
	err := s.Deliver(t.Context(), delivery("t0", `{"content": "x", "thread_name": "Incident 7"}`))
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "220003") {
		t.Errorf("thread_name in a text channel: %v, want a permanent error with code 220003", err)
	}
	err = newSink(t, "ops", fake.URL(), map[string]any{"thread_id": "42"}).Deliver(t.Context(), delivery("t1", `{"content": "x"}`))
	if !sink.IsPermanent(err) {
		t.Errorf("an unknown thread: %v, want a permanent error", err)
	}

	fake.SetForum(true)
	first := delivery("t2", `{"content": "Incident 7 opened", "thread_name": "Incident 7"}`)
	if err := s.Deliver(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	root := receipt(t, first)
	if root.ThreadID == "" || root.ThreadID != root.ChannelID {
		t.Fatalf("receipt %+v: want the thread the message created", root)
	}
	later := delivery("t3", `{"content": "Incident 7 resolved", "thread_name": "Incident 7", "update_root": true}`)
	later.ThreadRoot = first.Receipt()
	if err := s.Deliver(t.Context(), later); err != nil {
		t.Fatal(err)
	}
	msgs := fake.Messages()
	if len(msgs) != 2 || msgs[1].ChannelID != root.ThreadID {
		t.Fatalf("messages %+v: want the reply in thread %s", msgs, root.ThreadID)
	}
	if msgs[0].Content != "Incident 7 resolved" || msgs[0].Edits != 1 {
		t.Errorf("first message %q edited %d times, want it edited once to the reply's content", msgs[0].Content, msgs[0].Edits)
	}
}

// Check reads the webhook without posting, and fails for a webhook
// Discord does not know. Neither error quotes the token.
func TestCheck(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	if err := newSink(t, "ops", fake.URL(), nil).Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := newSink(t, "ops", strings.Replace(fake.URL(), fakediscord.Token, "revoked", 1), nil).Check(t.Context())
	if err == nil || strings.Contains(err.Error(), "revoked") {
		t.Errorf("Check with a revoked token: %v, want an error that does not quote it", err)
	}
	if n := len(fake.Messages()); n != 0 {
		t.Errorf("Check posted %d messages", n)
	}
	nonPublic := newSink(t, "ops", fake.URL(), map[string]any{"allow_private": false}).Check(t.Context())
	if !errors.Is(nonPublic, netguard.ErrNonPublicAddress) {
		t.Errorf("Check of a loopback webhook without allow_private: %v, want the address guard's refusal", nonPublic)
	}
}
