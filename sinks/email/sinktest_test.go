package email

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
)

// The email sink keeps the sink contract (package sinktest) against
// Mailpit, whose chaos triggers make it refuse a recipient for now (451)
// or for good (550); SMTP has no Retry-After.
func TestEmailKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t, "--enable-chaos")
	away := closedAddr(t)
	to := func(t testing.TB, smtp string) sink.Sink {
		t.Helper()
		s, err := Type.New(sinktest.SinkName, map[string]any{"smtp": smtp, "tls": TLSNone, "from": "outbox@example.com", "to": "ops@example.com"}, sink.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// refusingRecipients makes Mailpit answer RCPT TO with code until
	// the check ends.
	refusingRecipients := func(code int) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case {
			mp.SetChaos(t, map[string]int{"Recipient": code})
			t.Cleanup(func() { mp.SetChaos(t, nil) })
			return sinktest.Case{}
		}
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, mp.smtp) },
		Received: func(t testing.TB) []string {
			var ids []string
			for _, m := range mp.All(t) {
				ids = append(ids, m.MessageID)
			}
			return ids
		},
		Retryable: refusingRecipients(451),
		Permanent: refusingRecipients(550),
		// An SMTP server that never greets.
		Hang:        func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, sinktest.SilentAddr(t))} },
		Spoil:       func(d *sink.Delivery) { d.Payload = []byte(`{"subject":"no body"}`) },
		Unreachable: func(t testing.TB) sink.Sink { return to(t, away) },
	})
}
