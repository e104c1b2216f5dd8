package faketeams_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/sinks/teams/faketeams"
)

// The fake refuses what a Workflows webhook refuses, with its status:
// the rules the sink's tests rely on. (Mutation: dropping the size check
// answers the 30 KB message 202 and fails this test.)
func TestFakeAnswersAsTeams(t *testing.T) {
	t.Parallel()
	fake := faketeams.New()
	t.Cleanup(fake.Close)
	fake.Limit(100, faketeams.DefaultWindow)
	card := `{"type":"message","attachments":[{"contentType":"application/vnd.microsoft.card.adaptive","content":{"type":"AdaptiveCard","version":"1.4","body":[]}}]}`
	for name, tc := range map[string]struct {
		url, body string
		want      int
	}{
		"a card":            {fake.WebhookURL(), card, http.StatusAccepted},
		"a wrong signature": {fake.URLWithSig("other"), card, http.StatusUnauthorized},
		"not JSON":          {fake.WebhookURL(), `{`, http.StatusBadRequest},
		"not a message":     {fake.WebhookURL(), `{"text": "hello"}`, http.StatusBadRequest},
		"a legacy card":     {fake.WebhookURL(), strings.Replace(card, "AdaptiveCard", "MessageCard", 1), http.StatusBadRequest},
		"too large":         {fake.WebhookURL(), strings.Replace(card, `"body":[]`, `"body":[],"x":"`+strings.Repeat("x", faketeams.MaxMessageBytes)+`"`, 1), http.StatusRequestEntityTooLarge},
	} {
		resp, err := http.Post(tc.url, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, tc.want)
		}
	}
	if n := len(fake.Posts()); n != 1 {
		t.Errorf("%d posts kept, want 1", n)
	}
}
