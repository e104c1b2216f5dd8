package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
)

// A second pause by hand replaces the first, shortening it if asked.
func TestPauseByHandReplacesThePauseInForce(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if _, err := b.ob.PauseSink(ctx, b.pool, "s", operator.Pause{By: "a"}); err != nil {
		t.Fatal(err)
	}
	until, err := b.ob.PauseSink(ctx, b.pool, "s", operator.Pause{For: time.Minute, By: "b"})
	if err != nil {
		t.Fatal(err)
	}
	states, err := b.ob.SinkStates(ctx, b.pool)
	if err != nil {
		t.Fatal(err)
	}
	s := states["s"]
	if s.UntilResumed || !s.PausedUntil.Equal(until) || time.Until(until) > time.Minute || s.ChangedBy != "b" {
		t.Fatalf("state = %+v, want b's one-minute pause", s)
	}
}
