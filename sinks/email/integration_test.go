package email

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// deliverTimeout bounds one delivery in the integration tests.
const deliverTimeout = 10 * time.Second

// mailWait bounds waiting for Mailpit to show a delivered mail.
const mailWait = 10 * time.Second

func deliver(t *testing.T, s *Sink, d *sink.Delivery) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deliverTimeout)
	defer cancel()
	return s.Deliver(ctx, d)
}

func TestMailpitDelivery(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	s, err := newTestSink("alerts", Options{
		SMTP: mp.smtp, TLS: TLSNone, From: "Outbox <outbox@example.com>",
		To: []string{"default@example.com"}, SubjectPrefix: "[outboxd]",
	})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

	t.Run("full payload", func(t *testing.T) {
		t.Parallel()
		d := delivery("order-42", `{"subject":"Disk full","text":"plain body","html":"<p>html <b>body</b></p>",`+
			`"to":["Ann <ann@example.com>","bob@example.com"],"cc":"carl@example.com"}`)
		d.Sink, d.CreatedAt = "alerts", created
		if err := deliver(t, s, d); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		wantID := MessageID("alerts", "order-42", "example.com")
		if got := receiptID(t, d); got != wantID {
			t.Fatalf("receipt message_id = %s, want %s", got, wantID)
		}
		var receipt map[string]string
		json.Unmarshal(d.Receipt(), &receipt)
		if !strings.Contains(receipt["server_response"], "queued as") {
			t.Errorf("receipt server_response = %q, want Mailpit's final reply", receipt["server_response"])
		}

		m := mp.waitMessages(t, strings.Trim(wantID, "<>"), 1, mailWait)[0]
		if m.Subject != "[outboxd] Disk full" {
			t.Errorf("subject = %q", m.Subject)
		}
		if m.From.Address != "outbox@example.com" || m.From.Name != "Outbox" {
			t.Errorf("from = %+v", m.From)
		}
		if got := addresses(m.To); got != "ann@example.com,bob@example.com" || m.To[0].Name != "Ann" {
			t.Errorf("to = %+v, want the payload's recipients (not the default)", m.To)
		}
		if got := addresses(m.Cc); got != "carl@example.com" {
			t.Errorf("cc = %+v", m.Cc)
		}
		if strings.TrimSpace(m.Text) != "plain body" || !strings.Contains(m.HTML, "<p>html <b>body</b></p>") {
			t.Errorf("text = %q, html = %q", m.Text, m.HTML)
		}
		if !m.Date.Equal(created) {
			t.Errorf("date = %s, want the enqueue time %s", m.Date, created)
		}
	})

	t.Run("plain string payload to default recipients", func(t *testing.T) {
		t.Parallel()
		d := delivery("plain-1", `{"text":"just text"}`)
		d.Sink = "alerts"
		if err := deliver(t, s, d); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		m := mp.waitMessages(t, strings.Trim(MessageID("alerts", "plain-1", "example.com"), "<>"), 1, mailWait)[0]
		if got := addresses(m.To); got != "default@example.com" || m.Subject != "[outboxd]" || m.HTML != "" {
			t.Errorf("to = %s, subject = %q, html = %q", got, m.Subject, m.HTML)
		}
	})

	t.Run("retry keeps the Message-ID", func(t *testing.T) {
		t.Parallel()
		first := delivery("retry-7", `{"subject":"again","text":"x"}`)
		second := delivery("retry-7", `{"subject":"again","text":"x"}`)
		second.Attempt = 2
		for _, d := range []*sink.Delivery{first, second} {
			d.Sink = "alerts"
			if err := deliver(t, s, d); err != nil {
				t.Fatalf("Deliver attempt %d: %v", d.Attempt, err)
			}
		}
		if receiptID(t, first) != receiptID(t, second) {
			t.Fatalf("receipts name different Message-IDs: %s vs %s", first.Receipt(), second.Receipt())
		}
		mails := mp.waitMessages(t, strings.Trim(MessageID("alerts", "retry-7", "example.com"), "<>"), 2, mailWait)
		if mails[0].MessageID != mails[1].MessageID {
			t.Fatalf("Message-IDs differ: %s vs %s", mails[0].MessageID, mails[1].MessageID)
		}
	})
}

// TestMailpitSessionFailuresRetry covers failures before any mail is
// offered: they may be fixed on the server side, so they are retryable, and
// their errors never show the password.
func TestMailpitSessionFailuresRetry(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	tests := []struct {
		name, tls, wantErr string
	}{
		// Over a plain connection go-mail only uses mechanisms that keep the
		// password secret; Mailpit offers PLAIN and LOGIN only.
		{"auth without a safe mechanism", TLSNone, "authentication mechanism"},
		// Mailpit without a certificate offers no STARTTLS.
		{"starttls not offered", TLSStartTLS, "STARTTLS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := newTestSink("session", Options{SMTP: mp.smtp, TLS: tc.tls, From: "outbox@example.com",
				Username: "outboxd", Password: "s3cr3t-pw"})
			if err != nil {
				t.Fatal(err)
			}
			err = deliver(t, s, delivery("session-1", `{"text":"hi","to":"a@example.com"}`))
			if err == nil || sink.IsPermanent(err) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want a retryable error mentioning %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cr3t-pw") {
				t.Fatalf("error %q reveals the password", err)
			}
		})
	}
}

func TestMailpitReplyMapping(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t, "--enable-chaos")
	s, err := newTestSink("chaos", Options{SMTP: mp.smtp, TLS: TLSNone, From: "outbox@example.com", To: []string{"a@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	// Mailpit's chaos triggers are global to the server: these cases run in
	// order, not in parallel.
	tests := []struct {
		name          string
		triggers      map[string]int
		wantPermanent bool
		wantErr       string
	}{
		{"recipient 550", map[string]int{"Recipient": 550}, true, "550"},
		{"recipient 451", map[string]int{"Recipient": 451}, false, "451"},
		{"sender 554", map[string]int{"Sender": 554}, true, "554"},
		{"sender 421", map[string]int{"Sender": 421}, false, "421"},
	}
	for i, tc := range tests {
		mp.setChaos(t, tc.triggers)
		err := deliver(t, s, delivery("chaos-"+tc.name, `{"text":"hi"}`))
		if err == nil || sink.IsPermanent(err) != tc.wantPermanent || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("case %d %s: error = %v, want permanent=%v mentioning %s", i, tc.name, err, tc.wantPermanent, tc.wantErr)
		}
	}
	mp.setChaos(t, nil)
	if err := deliver(t, s, delivery("chaos-ok", `{"text":"hi"}`)); err != nil {
		t.Fatalf("without chaos: %v", err)
	}
}

// receiptID returns the message_id recorded in d's receipt.
func receiptID(t *testing.T, d *sink.Delivery) string {
	t.Helper()
	var receipt struct {
		MessageID string `json:"message_id"`
	}
	if err := json.Unmarshal(d.Receipt(), &receipt); err != nil {
		t.Fatalf("receipt %s: %v", d.Receipt(), err)
	}
	return receipt.MessageID
}

func addresses(list []mailpitAddress) string {
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.Address
	}
	return strings.Join(out, ",")
}
