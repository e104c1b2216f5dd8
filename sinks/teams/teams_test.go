package teams_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/teams"
)

// A title and a text arrive as an Adaptive Card the fake accepts (it
// refuses anything else with 400), under the delivery id.
// Mutation: the card without its version makes the fake answer 400 and
// this test fail.
func TestDeliverPostsAnAdaptiveCard(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := build(t, "alerts", fake.WebhookURL())
	if err := s.Deliver(t.Context(), delivery("deploy-42", `{"title": "Deploy 42", "text": "finished <ok> & **green**"}`)); err != nil {
		t.Fatal(err)
	}
	posts := fake.Posts()
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
	if posts[0].DeliveryID != "alerts/deploy-42" {
		t.Errorf("delivery id %q, want alerts/deploy-42", posts[0].DeliveryID)
	}
	var card struct {
		Type, Version string
		Body          []struct{ Type, Text, Weight string }
	}
	if err := json.Unmarshal(posts[0].Card, &card); err != nil {
		t.Fatal(err)
	}
	if card.Type != "AdaptiveCard" || card.Version != teams.CardVersion || len(card.Body) != 2 ||
		card.Body[0].Text != "Deploy 42" || card.Body[0].Weight != "Bolder" || card.Body[1].Text != "finished <ok> & **green**" {
		t.Errorf("card %s", posts[0].Card)
	}
}

// A card of the producer's own is posted as it is.
func TestDeliverPostsTheProducersCard(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := build(t, "alerts", fake.WebhookURL())
	card := `{"type":"AdaptiveCard","version":"1.5","body":[{"type":"FactSet","facts":[{"title":"build","value":"17"}]}]}`
	if err := s.Deliver(t.Context(), delivery("build-17", `{"card": `+card+`}`)); err != nil {
		t.Fatal(err)
	}
	if posts := fake.Posts(); len(posts) != 1 || string(posts[0].Card) != card {
		t.Fatalf("posts %+v, want the card as sent", posts)
	}
}

// Payloads Teams would refuse, or would accept with 202 and then fail to
// post, fail permanently before any request.
// Mutation: dropping the size check lets the 30 KB text reach the fake
// (413, still permanent, but a request: the test fails on the count).
func TestBadPayloadsFailPermanentlyWithoutARequest(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s := build(t, "alerts", fake.WebhookURL())
	for name, payload := range map[string]string{
		"not an object":      `"hello"`,
		"unknown field":      `{"text": "x", "blocks": []}`,
		"empty":              `{}`,
		"card and text":      `{"text": "x", "card": {"type": "AdaptiveCard", "version": "1.4"}}`,
		"card of other type": `{"card": {"type": "MessageCard", "version": "1.0"}}`,
		"card no version":    `{"card": {"type": "AdaptiveCard", "body": []}}`,
		"card not an object": `{"card": [1, 2]}`,
		"too large":          `{"text": "` + strings.Repeat("x", 30*1024) + `"}`,
	} {
		err := s.Deliver(t.Context(), delivery("bad", payload))
		if !sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("%d requests reached Teams, want none", n)
	}
}

// Teams' own refusals: a URL whose signature is wrong (401) fails
// permanently, and the error repeats neither the URL nor its signature.
func TestWrongSignatureIsPermanentAndSecret(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	const sig = "revoked-signature-123"
	err := build(t, "alerts", fake.URLWithSig(sig)).Deliver(t.Context(), delivery("k", `{"text": "x"}`))
	if !sink.IsPermanent(err) {
		t.Fatalf("%v, want permanent", err)
	}
	if code, _ := sink.StatusCode(err); code != 401 {
		t.Errorf("status %d, want 401", code)
	}
	if strings.Contains(err.Error(), sig) || strings.Contains(err.Error(), fake.URL) {
		t.Errorf("the error shows the URL: %v", err)
	}
}

// Past Teams' four requests a second the webhook answers 429 with
// Retry-After in seconds; the sink turns it into sink.RetryAfter with
// that wait, spending no attempt.
// Mutation: classifying with the status alone (no Retry-After read)
// makes RetryAfterDelay report false and this test fail.
func TestThrottledWebhookAsksToComeBackLater(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.Limit(2, time.Hour) // a window no test outlives: the third request is throttled
	s := build(t, "alerts", fake.WebhookURL())
	for i := range 2 {
		if err := s.Deliver(t.Context(), delivery(string(rune('a'+i)), `{"text": "x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Deliver(t.Context(), delivery("c", `{"text": "x"}`))
	d, ok := sink.RetryAfterDelay(err)
	if !ok || d < 59*time.Minute || d > time.Hour {
		t.Fatalf("%v: RetryAfterDelay %s %v, want about an hour", err, d, ok)
	}
	if code, _ := sink.StatusCode(err); code != 429 {
		t.Errorf("status %d, want 429", code)
	}
}

// The sink's default rate limit keeps within Teams' documented limits:
// at most four requests in any second and 100 in any minute.
func TestDefaultRateLimitKeepsWithinTeamsLimits(t *testing.T) {
	t.Parallel()
	s := build(t, "alerts", "https://example.com/workflows/x")
	rl := s.(sink.RateLimitDefaulter).DefaultRateLimit()
	perSecond := float64(rl.Rate)*float64(time.Second)/float64(rl.Per) + float64(rl.Burst)
	perMinute := float64(rl.Rate)*float64(time.Minute)/float64(rl.Per) + float64(rl.Burst)
	if perSecond > 4 || perMinute > 100 {
		t.Errorf("%+v allows %.0f a second and %.0f a minute", rl, perSecond, perMinute)
	}
}

// Bad options are refused with errors naming the option, never the URL.
func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]map[string]any{
		"no url":       {},
		"ftp url":      {"url": "ftp://secret-host/x"},
		"zero timeout": {"url": "https://example.com/x?sig=s3cret", "timeout": "0s"},
	} {
		_, err := teams.Type.New("alerts", opts, sink.Env{})
		if err == nil || (!strings.Contains(err.Error(), "option url") && !strings.Contains(err.Error(), "option timeout")) {
			t.Errorf("%s: %v, want an error naming the option", name, err)
			continue
		}
		if strings.Contains(err.Error(), "secret-host") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the URL: %v", name, err)
		}
	}
}

// A target without a template posts the event's type and key as the
// title and its data as the text, a card the fake accepts.
func TestUntemplatedEventBecomesACard(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	payload, err := teams.Shape().Untemplated(sink.Event{Type: "order.created", Key: "42", Data: json.RawMessage(`{"total":9}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := build(t, "alerts", fake.WebhookURL()).Deliver(context.Background(), delivery("e", string(payload))); err != nil {
		t.Fatal(err)
	}
	if posts := fake.Posts(); len(posts) != 1 || !strings.Contains(string(posts[0].Card), `"order.created 42"`) {
		t.Errorf("posts %+v", posts)
	}
}

// With allow_private false the SSRF guard refuses a loopback webhook,
// permanently and without a request.
// Mutation: not passing AllowPrivate to the client delivers the message.
func TestAllowPrivateFalseRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	s, err := teams.Type.New("alerts", map[string]any{"url": fake.WebhookURL(), "allow_private": false}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Deliver(t.Context(), delivery("k", `{"text": "x"}`)); !sink.IsPermanent(err) {
		t.Errorf("%v, want a permanent refusal", err)
	}
	if n := fake.Requests(); n != 0 {
		t.Errorf("%d requests reached the fake, want none", n)
	}
}
