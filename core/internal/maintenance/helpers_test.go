package maintenance_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// leaseRound is the election round of the tests whose leader must keep
// the lead throughout: its lease outlasts any stall of a loaded machine.
const leaseRound = time.Minute

// setup returns a fresh outbox and the Env of a relay on it, whose signals
// the test reads.
func setup(t *testing.T) (coretest.Bundle, maintenance.Env) {
	t.Helper()
	b := coretest.Setup(t)
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	return b, maintenance.Env{DB: b.Pool, Q: q, Logger: slog.New(slog.DiscardHandler), Signals: &relaysignal.Relay{}}
}

// start starts s with the test's context and stops it when the test ends.
func start(t *testing.T, ctx context.Context, s maintenance.Service) {
	t.Helper()
	s.Start(ctx)
	t.Cleanup(s.Stop)
}
