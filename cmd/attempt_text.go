package cmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/operator"
)

// attemptText is an attempt's details on one line, for a person: its
// status, how long it took, when it started and where the request went
// ("HTTP 503 in 12.5 ms at 2026-01-02T14:00:00Z, to 203.0.113.7:443");
// "" for none. Its answer is printed apart, escaped (see writeMessage).
func attemptText(a *operator.AttemptDetails) string {
	if a == nil {
		return ""
	}
	var b strings.Builder
	if a.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d ", a.Status)
	}
	fmt.Fprintf(&b, "in %.1f ms at %s", a.DurationMS, a.StartedAt.UTC().Format(time.RFC3339))
	if a.RemoteAddr != "" {
		fmt.Fprintf(&b, ", to %s", a.RemoteAddr)
	}
	return b.String()
}
