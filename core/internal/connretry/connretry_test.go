package connretry_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/connretry"
)

// The first retry is immediate, the next ones double from initial up to
// max. Mutation: returning initial for the first retry (the old schedule)
// makes this fail.
func TestScheduleRetriesAtOnceThenBacksOff(t *testing.T) {
	t.Parallel()
	b := connretry.New(10*time.Millisecond, 35*time.Millisecond)
	want := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
	for i, w := range want {
		got, stop := b.Next()
		if stop || got != w {
			t.Fatalf("retry %d: got %v (stop %v), want %v", i+1, got, stop, w)
		}
	}
}
