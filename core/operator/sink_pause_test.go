package operator_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// A second pause by hand replaces the first, shortening it if asked.
func TestPauseByHandReplacesThePauseInForce(t *testing.T) {
	b := coretest.Setup(t)
	ctx := context.Background()
	if _, err := b.Outbox.PauseSink(ctx, b.Pool, testdb.Actor, "s", operator.Pause{By: "a"}); err != nil {
		t.Fatal(err)
	}
	until, err := b.Outbox.PauseSink(ctx, b.Pool, testdb.Actor, "s", operator.Pause{For: time.Minute, By: "b"})
	if err != nil {
		t.Fatal(err)
	}
	states, err := b.Outbox.SinkStates(ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	s := states["s"]
	if s.UntilResumed || !s.PausedUntil.Equal(until) || time.Until(until) > time.Minute || s.ChangedBy != "b" {
		t.Fatalf("state = %+v, want b's one-minute pause", s)
	}
}
