package pagerduty_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/sinks/pagerduty"
	"github.com/outboxd/outboxd/sinks/pagerduty/fakepagerduty"
)

// outage is how many requests the retryable case's fake fails: more than
// the check sends.
const outage = 100

// The pagerduty sink keeps the sink contract (package sinktest) against the
// fake PagerDuty: one that accepts, one down (503), one refusing the
// routing key (400), one over its limit (429, PagerDuty's way: no
// Retry-After, so the pause is DefaultRetryAfter) and a silent address.
// The id a receiver de-duplicates on is the event's dedup_key: the
// delivery id for the kit's rows, which have no ordering key.
func TestPagerDutyKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	accepting := newFake(t)
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, sinktest.SinkName, accepting) },
		Prepare: func(d *sink.Delivery) {
			d.Payload = json.RawMessage(`{"summary": "sinktest"}`)
		},
		Received: func(testing.TB) []string {
			var keys []string
			for _, ev := range accepting.Events() {
				keys = append(keys, ev.DedupKey)
			}
			return keys
		},
		Retryable: func(t testing.TB) sinktest.Case {
			f := newFake(t)
			for range outage {
				f.Fail(http.StatusServiceUnavailable)
			}
			return sinktest.Case{Sink: to(t, sinktest.SinkName, f)}
		},
		Permanent: func(t testing.TB) sinktest.Case {
			f := newFake(t)
			return sinktest.Case{Sink: build(t, sinktest.SinkName, map[string]any{"routing_key": "not-a-routing-key", "events_url": f.URL()})}
		},
		RetryAfter: func(t testing.TB) sinktest.Case {
			f := newFake(t)
			f.SetLimit(0, time.Hour)
			return sinktest.Case{Sink: to(t, sinktest.SinkName, f), Delay: pagerduty.DefaultRetryAfter}
		},
		Hang: func(t testing.TB) sinktest.Case {
			url := "http://" + sinktest.SilentAddr(t) + fakepagerduty.EnqueuePath
			return sinktest.Case{Sink: build(t, sinktest.SinkName, map[string]any{"routing_key": fakepagerduty.RoutingKey, "events_url": url})}
		},
	})
}
