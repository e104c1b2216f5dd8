package email

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/mailpit"
)

// newTestSink builds the email sink called name from o, recording its
// spans with the global tracer provider, as the sink type does when its
// host leaves the provider to the registry.
func newTestSink(name string, o Options) (*Sink, error) {
	return newSink(name, o, sink.Env{TracerProvider: otel.GetTracerProvider()})
}

// Mailpit is the real SMTP server of the integration tests
// (internal/mailpit); these names keep the tests short.

// mailpitMessage is a mail as Mailpit reports it.
type mailpitMessage = mailpit.Message

// mailpitAddress is an address as Mailpit reports it.
type mailpitAddress = mailpit.Address

// mp is one running Mailpit, with its SMTP address at hand.
type mp struct {
	*mailpit.Server
	smtp string
}

// startMailpit starts a Mailpit for t (stopped at cleanup) with extra flags.
func startMailpit(t *testing.T, extra ...string) *mp {
	t.Helper()
	s := mailpit.Start(t, extra...)
	return &mp{Server: s, smtp: s.SMTP}
}

func (m *mp) messages(t *testing.T, id string) []mailpitMessage { return m.Messages(t, id) }

func (m *mp) waitMessages(t *testing.T, id string, n int, timeout time.Duration) []mailpitMessage {
	return m.WaitMessages(t, id, n, timeout)
}

func (m *mp) setChaos(t *testing.T, triggers map[string]int) { m.SetChaos(t, triggers) }
