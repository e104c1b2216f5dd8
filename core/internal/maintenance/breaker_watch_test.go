package maintenance_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/core/internal/maintenance"
)

// watchRound is the breaker watch's interval in these tests: longer than
// any test, so every round after the first comes from a kick or a probe
// due, never from the interval.
const watchRound = time.Hour

// watchWait bounds a wait for the watch's next call on a loaded machine.
const watchWait = 20 * time.Second

// fakeBreakers are a relay's breakers that hand each of the watch's calls
// to the test, in lockstep: calls is unbuffered, so the watch waits at
// each call until the test takes it, and a test that can send a kick has
// seen every call before it. The relay's own breakers (package relay) are
// tested against PostgreSQL by its breaker tests; these check the watch's
// schedule alone.
type fakeBreakers struct {
	calls    chan string
	loadErr  error         // returned by the first load
	probeDue time.Duration // returned by the first act

	registered, unregistered atomic.Bool // the gauge
}

func newFakeBreakers() *fakeBreakers { return &fakeBreakers{calls: make(chan string)} }

// call hands name to the test, or gives up when the watch stops.
func (f *fakeBreakers) call(ctx context.Context, name string) {
	select {
	case f.calls <- name:
	case <-ctx.Done():
	}
}

func (f *fakeBreakers) LoadBreakers(ctx context.Context) error {
	f.call(ctx, "load")
	err := f.loadErr
	f.loadErr = nil
	return err
}

func (f *fakeBreakers) ActOnBreakers(ctx context.Context) time.Duration {
	f.call(ctx, "act")
	due := f.probeDue
	f.probeDue = 0
	return due
}

func (f *fakeBreakers) RegisterCircuitGauge() (metric.Registration, error) {
	f.registered.Store(true)
	return gaugeRegistration{unregistered: &f.unregistered}, nil
}

// gaugeRegistration records the gauge's unregistration.
type gaugeRegistration struct {
	metric.Registration
	unregistered *atomic.Bool
}

func (g gaugeRegistration) Unregister() error {
	g.unregistered.Store(true)
	return nil
}

// expect waits for the watch's next calls and fails unless they are want.
func (f *fakeBreakers) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-f.calls:
			if got != w {
				t.Fatalf("the breaker watch called %s, want %s", got, w)
			}
		case <-time.After(watchWait):
			t.Fatalf("the breaker watch did not call %s", w)
		}
	}
}

// kickWaiting kicks the watch and fails if it calls anything first: the
// kick channel is unbuffered, so the watch takes the kick only once it
// waits for its next round.
func (f *fakeBreakers) kickWaiting(t *testing.T, kick chan<- struct{}) {
	t.Helper()
	select {
	case kick <- struct{}{}:
	case got := <-f.calls:
		t.Fatalf("the breaker watch called %s, want it waiting for its next round", got)
	case <-time.After(watchWait):
		t.Fatal("the breaker watch took no kick")
	}
}

func newWatch(f *fakeBreakers, kick <-chan struct{}) *maintenance.BreakerWatch {
	return maintenance.NewBreakerWatch(maintenance.Env{Logger: slog.New(slog.DiscardHandler)}, f, watchRound, kick)
}

// The watch registers the gauge, loads the breakers and acts on them at
// once; a kick (the relay has just loaded them) makes it act again
// without loading; Stop ends it and unregisters the gauge.
//
// Mutation checked: loading after a kick too (loaded left false) fails
// this test; so does not unregistering the gauge.
func TestBreakerWatchActsAtOnceAndOnAKickWithoutLoading(t *testing.T) {
	f := newFakeBreakers()
	kick := make(chan struct{})
	w := newWatch(f, kick)
	w.Start(t.Context())
	f.expect(t, "load", "act")
	f.kickWaiting(t, kick)
	f.expect(t, "act")
	f.kickWaiting(t, kick)
	w.Stop()
	if !f.registered.Load() || !f.unregistered.Load() {
		t.Errorf("gauge registered %v, unregistered at Stop %v; want both", f.registered.Load(), f.unregistered.Load())
	}
}

// A probe due before the interval brings the next round forward: the
// watch loads and acts again then, not an interval later.
//
// Mutation checked: ignoring ActOnBreakers's due (next left at the
// interval) fails this test.
func TestBreakerWatchComesBackWhenAProbeIsDue(t *testing.T) {
	f := newFakeBreakers()
	f.probeDue = time.Millisecond
	w := newWatch(f, nil)
	w.Start(t.Context())
	defer w.Stop()
	f.expect(t, "load", "act", "load", "act")
}

// Breakers the watch could not load are not acted on: what it would act
// on is stale. It waits for its next round instead.
//
// Mutation checked: acting after a failed load fails this test.
func TestBreakerWatchDoesNotActOnBreakersItCouldNotLoad(t *testing.T) {
	f := newFakeBreakers()
	f.loadErr = errors.New("connection refused")
	kick := make(chan struct{})
	w := newWatch(f, kick)
	w.Start(t.Context())
	defer w.Stop()
	f.expect(t, "load")
	f.kickWaiting(t, kick)
	f.expect(t, "act")
}
