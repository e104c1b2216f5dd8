package sinks_test

import (
	"fmt"
	"time"

	"github.com/outboxd/outboxd/sinks"
)

func ExampleParseRetryAfter() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 01 Mar 2026 12:00:30 GMT", "later"} {
		d, ok := sinks.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s false
}
