package breaker_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/breaker"
)

// BenchmarkHealthyDelivery is what a healthy sink's breaker costs each
// delivery on the relay's hot path (settleBreaker, besides a map lookup
// and its sink's mutex): classifying a nil error and counting it in the
// window, with the default thresholds. docs/performance.md quotes it.
func BenchmarkHealthyDelivery(b *testing.B) {
	th := breaker.Thresholds{Consecutive: 5, Ratio: 0.5, MinDeliveries: 20, Window: 30 * time.Second}
	var w breaker.Window
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if opens, _ := w.Record(breaker.Classify(nil), now.Add(time.Duration(i)*time.Microsecond), th); opens {
			b.Fatal("a healthy delivery opened the breaker")
		}
	}
}
