package email

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink/sinktest"
)

// Check connects to the SMTP server and says EHLO without sending a mail;
// against an address nothing listens on it fails.
// (Mutation: Check returning nil after building the client, without
// dialing, passes the closed address and fails this test.)
func TestCheckDialsWithoutSending(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	newSink := func(smtp string) *Sink {
		s, err := newTestSink("alerts", Options{SMTP: smtp, TLS: TLSNone, From: "outbox@example.com", To: []string{"ops@example.com"}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sinktest.CheckChecker(t, newSink(mp.smtp), newSink(closedAddr(t)), func() int { return len(mp.All(t)) })
}
