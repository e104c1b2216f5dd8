package email

import (
	"context"
	"testing"
	"time"
)

// Check connects to the SMTP server and says EHLO without sending a mail;
// against an address nothing listens on it fails.
// (Mutation: Check returning nil after building the client, without
// dialing, passes the closed address and fails this test.)
func TestCheckDialsWithoutSending(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := NewSink("alerts", Options{SMTP: mp.smtp, TLS: TLSNone, From: "outbox@example.com", To: []string{"ops@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check against Mailpit: %v", err)
	}
	if got := mp.All(t); len(got) != 0 {
		t.Errorf("Check sent %d mails", len(got))
	}
	closed, err := NewSink("alerts", Options{SMTP: closedAddr(t), TLS: TLSNone, From: "outbox@example.com", To: []string{"ops@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Check(ctx); err == nil {
		t.Error("Check against a closed address succeeded")
	}
}
