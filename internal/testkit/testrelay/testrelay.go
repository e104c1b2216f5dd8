// Package testrelay runs relays inside tests, whose test signals say what
// they did, and polls conditions outside the process with deadlines, so
// test packages across the repository share one way to do both.
package testrelay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/relaysignal"
)

// stopTimeout bounds how long a relay may take to drain when its test ends.
const stopTimeout = time.Minute

// pollInterval is how often WaitFor checks its condition.
const pollInterval = 10 * time.Millisecond

// Run starts a relay of the outbox in schema on pool (see New) until the
// test ends, then cancels it and fails the test unless Run returns nil (a
// clean drain) within a minute. It returns the relay's test signals, to wait on what the relay
// does.
func Run(t testing.TB, pool *pgxpool.Pool, schema string, cfg relay.Config) *relaysignal.Relay {
	t.Helper()
	signals := &relaysignal.Relay{}
	RunWith(t, pool, schema, cfg, signals)
	return signals
}

// RunWith is Run with the relay sending its signals to signals, which
// several relays of one test may share: a test running three relays waits
// on what any of them does.
func RunWith(t testing.TB, pool *pgxpool.Pool, schema string, cfg relay.Config, signals *relaysignal.Relay) {
	t.Helper()
	relay := New(t, pool, schema, cfg)
	ctx, cancel := context.WithCancel(relaysignal.WithRelay(context.Background(), signals))
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("relay.Run: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("relay did not stop within %s of cancellation", stopTimeout)
		}
	})
}

// New returns a relay of the outbox in schema on pool, made as a process
// makes one (outboxd.New, then Outbox.NewRelay), failing the test if cfg
// is refused, for a test that runs it itself.
func New(t testing.TB, pool *pgxpool.Pool, schema string, cfg relay.Config) *relay.Relay {
	t.Helper()
	ob, err := outboxd.New(pool, outboxd.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ob.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// WaitFor polls cond until it holds, failing the test with what when
// timeout passes first. It is for what happens outside the test's process
// (a relay in another process, a receiver, Mailpit, Jaeger): a relay the
// test runs itself signals what it does (see Run), and tests wait on that.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// MaxInWindow returns the most of times (sorted ascending) that fall within
// any window of length w: what a rate-limit test compares with the limit.
func MaxInWindow(times []time.Time, w time.Duration) int {
	most, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}
