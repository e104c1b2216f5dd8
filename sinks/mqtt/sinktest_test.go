package mqtt_test

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
)

// The mqtt sink keeps the sink contract (package sinktest) against the
// machine's Mosquitto: topics under a prefix of the test's own, a
// listener that never answers and a port nothing listens on. An MQTT
// 3.1.1 broker cannot refuse a publish nor ask for a pause, so there is no
// Permanent nor RetryAfter case: a message's own faults (its topic) are
// the permanent failures, checked by Spoil.
func TestMQTTKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	closed := closedURL(t)
	to := func(t testing.TB, url string) sink.Sink {
		o := sub.options(url, "{{.Headers.topic}}")
		o["connect_timeout"] = "1s"
		return build(t, sinktest.SinkName, o)
	}
	sinktest.Run(t, sinktest.Harness{
		New:         func(t testing.TB) sink.Sink { return to(t, "tcp://"+addr) },
		Prepare:     func(d *sink.Delivery) { d.Headers["topic"] = "events" },
		Received:    func(t testing.TB) []string { return sub.ids(t, "events") },
		Retryable:   func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, closed)} },
		Hang:        func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, "tcp://"+sinktest.SilentAddr(t))} },
		Spoil:       func(d *sink.Delivery) { d.Headers["topic"] = "events/#" },
		Unreachable: func(t testing.TB) sink.Sink { return to(t, closed) },
	})
}
