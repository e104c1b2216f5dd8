package nats_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/registry"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// The binary registers the sink types in sinks/builtin. These tests build sinks
// through the registry, as plugins.yaml does, in this process and in the
// crash tests' children, so they register this one.
func init() { registry.Register(natssink.Type) }

// duplicateWindow is the test streams' deduplication window: longer than
// any test, so every redelivery falls inside it.
const duplicateWindow = 5 * time.Minute

// streamReady bounds the wait for a (freshly started) server to create a
// stream.
const streamReady = 20 * time.Second

// serverURL returns the machine's NATS server, failing in CI and skipping
// elsewhere when it is down.
func serverURL(t *testing.T) string {
	t.Helper()
	addr := brokertest.NATSAddr()
	brokertest.Require(t, "NATS", addr,
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server")
	return "nats://" + addr
}

// testStream is a stream of a test's own, deleted when the test ends.
type testStream struct {
	name    string // also the subjects' prefix: NAME.>
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string // NAME.events, a subject the stream covers
}

// newStream creates a stream of a unique name over "NAME.>" with a
// duplicate window longer than the test, on the server at url.
func newStream(t *testing.T, url string) *testStream {
	t.Helper()
	return newStreamNamed(t, url, "OUTBOXD_TEST_"+strings.ToUpper(rand.Text()[:10]))
}

// newStreamNamed is newStream with a given name.
func newStreamNamed(t *testing.T, url, name string) *testStream {
	t.Helper()
	nc, err := natsio.Connect(url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := &testStream{name: name, js: js, subject: name + ".events"}
	// Polls: JetStream (another process) refuses streams until it is ready.
	testrelay.WaitFor(t, streamReady, "JetStream to create stream "+name, func() bool {
		s.stream, err = js.CreateStream(t.Context(), jetstream.StreamConfig{
			Name: name, Subjects: []string{name + ".>"}, Duplicates: duplicateWindow, Storage: jetstream.FileStorage,
		})
		return err == nil
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil && !nc.IsClosed() {
			t.Logf("delete stream %s: %v", name, err)
		}
	})
	return s
}

// count returns how many messages the stream holds.
func (s *testStream) count(t testing.TB) uint64 {
	t.Helper()
	info, err := s.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// messages reads every message of the stream in stream order.
func (s *testStream) messages(t testing.TB) []brokertest.Received {
	t.Helper()
	info, err := s.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []brokertest.Received
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		headers := map[string]string{}
		for k := range m.Header {
			headers[strings.ToLower(k)] = m.Header.Get(k)
		}
		out = append(out, brokertest.Received{
			ID: m.Header.Get(jetstream.MsgIDHeader), Dest: m.Subject, Payload: m.Data, Headers: headers,
		})
	}
	return out
}

// target is the nats sink publishing on subject, into st.
func target(url, subject string, st **testStream) brokertest.Target {
	return brokertest.Target{
		Type: natssink.Type.Name, Options: map[string]any{"url": url, "subject": subject},
		Read: func(t testing.TB) []brokertest.Received { return (*st).messages(t) },
		Once: true,
	}
}

// build makes a nats sink through the registry, closed when the test ends.
func build(t *testing.T, name string, options map[string]any) sink.Sink {
	t.Helper()
	return brokertest.Target{Type: natssink.Type.Name, Options: options}.Build(t, name)
}
