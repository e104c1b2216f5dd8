package nats_test

import (
	"testing"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// The nats sink keeps the sink contract (package sinktest) against the
// machine's NATS server: a stream of the test's own, a subject no stream
// covers, a full stream, a subject whose one subscriber never answers,
// and a port nothing listens on.
func TestNATSKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	closed := "nats://127.0.0.1:" + itoa(proc.FreePort(t))
	// A stream of one message that refuses more.
	full := newStream(t, url)
	if _, err := full.js.UpdateStream(t.Context(), jetstream.StreamConfig{
		Name: full.name, Subjects: []string{full.name + ".>"}, MaxMsgs: 1, Discard: jetstream.DiscardNew, Duplicates: duplicateWindow,
	}); err != nil {
		t.Fatal(err)
	}
	to := func(t testing.TB, url, subject string) sink.Sink {
		return brokertest.Target{Type: natssink.Type.Name, Options: map[string]any{"url": url, "subject": subject, "connect_timeout": "1s"}}.
			Build(t, sinktest.SinkName)
	}
	at := func(url, subject string) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, url, subject)} }
	}
	// A subject with a white-space token is none: the ordering key
	// "bad key" spoils a delivery.
	subject := st.name + `.{{or .OrderingKey "events"}}`
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, url, subject) },
		Received: func(t testing.TB) []string {
			var ids []string
			for _, m := range st.messages(t) {
				ids = append(ids, m.ID)
			}
			return ids
		},
		Retryable: at(closed, "x.y"),
		Permanent: at(url, "OUTBOXD_NO_SUCH_STREAM.x"),
		RetryAfter: func(t testing.TB) sinktest.Case {
			s := to(t, url, full.subject)
			if full.count(t) == 0 {
				if err := s.Deliver(t.Context(), &sink.Delivery{Sink: sinktest.SinkName, DedupKey: "fills-the-stream", Payload: []byte(`{}`)}); err != nil {
					t.Fatalf("the one message the full stream holds: %v", err)
				}
			}
			return sinktest.Case{Sink: s, Delay: natssink.DefaultStreamFullPause}
		},
		Hang: func(t testing.TB) sinktest.Case {
			// No stream covers the subject, and its one subscriber takes
			// the publish and never acknowledges it.
			nc, err := natsio.Connect(url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			hang := st.name + "_HANG.x"
			if _, err := nc.Subscribe(hang, func(*natsio.Msg) {}); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			return sinktest.Case{Sink: to(t, url, hang)}
		},
		Spoil:       func(d *sink.Delivery) { d.OrderingKey = "bad key" },
		Unreachable: func(t testing.TB) sink.Sink { return to(t, closed, "x.y") },
	})
}
