package email

import (
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
)

// TestAllowedRecipientDomains: a payload's to replaces the configured
// recipients and its cc adds some, which lets a producer mail anyone;
// allowed_recipient_domains keeps that to the listed domains. A payload
// naming another domain fails permanently and nothing is sent; recipients
// at an allowed domain (in any case) get the mail from the real SMTP
// server; a to option outside the domains is a configuration error.
// (Mutation: allowed_recipient_domains never checked fails this test.)
func TestAllowedRecipientDomains(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	options := map[string]any{
		"smtp": mp.smtp, "tls": TLSNone, "from": "outbox@example.com", "to": []any{"ops@example.com"},
		"allowed_recipient_domains": []any{"example.com", "Partner.Example.ORG"},
	}
	snk, err := Type.New("mail", options, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	s := snk.(*Sink)

	for key, payload := range map[string]string{
		"refused-to":        `{"text":"hi","to":["ops@example.com","thief@attacker.test"]}`,
		"refused-cc":        `{"text":"hi","cc":"Thief <thief@attacker.test>"}`,
		"refused-subdomain": `{"text":"hi","to":"a@mail.example.com"}`,
	} {
		err := deliver(t, s, delivery(key, payload))
		if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "allowed recipient domain") {
			t.Errorf("%s: %v, want a permanent error naming the allowed domains", key, err)
		}
	}
	for key, payload := range map[string]string{
		"default-to": `{"text":"hi"}`,
		"chosen-to":  `{"text":"hi","to":"Ann <ANN@Example.com>","cc":["b@partner.example.org"]}`,
	} {
		if err := deliver(t, s, delivery(key, payload)); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		mp.waitMessages(t, strings.Trim(MessageID("mail", key, "example.com"), "<>"), 1, mailWait)
	}
	for _, key := range []string{"refused-to", "refused-cc", "refused-subdomain"} {
		if got := mp.messages(t, strings.Trim(MessageID("mail", key, "example.com"), "<>")); len(got) != 0 {
			t.Errorf("%s: a refused payload was mailed: %+v", key, got)
		}
	}

	options["to"] = []any{"ops@elsewhere.test"}
	if _, err := Type.New("mail", options, sink.Env{}); err == nil || !strings.Contains(err.Error(), "option to[0]") {
		t.Errorf("a to option outside the allowed domains: %v, want an error naming it", err)
	}
}
