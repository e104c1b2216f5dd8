package pubsub_test

import (
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/registry"
	pubsubsink "github.com/outboxd/outboxd/sinks/pubsub"
)

// The binary registers the sink types in sinks/builtin. These tests build
// sinks through the registry, as plugins.yaml does, so they register this
// one.
func init() { registry.Register(pubsubsink.Type) }

// project is the fake's project.
const project = "outboxd-test"

// fake is the client library's in-process Pub/Sub (pstest) with a client
// of the test's own, closed when the test ends.
type fake struct {
	srv    *pstest.Server
	client *gpubsub.Client
}

// newFake starts a fake Pub/Sub, with reactors (injected errors) if any.
func newFake(t testing.TB, reactors ...pstest.ServerReactorOption) *fake {
	t.Helper()
	srv := pstest.NewServer(reactors...)
	client, err := gpubsub.NewClient(t.Context(), project,
		option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = srv.Close() })
	return &fake{srv: srv, client: client}
}

// subscription is a topic of the fake and an ordered subscription to it,
// from which the test reads what the sink published.
type subscription struct {
	fake  *fake
	topic string // the id, as the sink's option
	name  string // the subscription's full name

	mu       sync.Mutex
	received []brokertest.Received
}

// topic creates the topic id and an ordered subscription to it.
func (f *fake) topic(t testing.TB, id string) *subscription {
	t.Helper()
	full := "projects/" + project + "/topics/" + id
	if _, err := f.client.TopicAdminClient.CreateTopic(t.Context(), &pb.Topic{Name: full}); err != nil {
		t.Fatalf("create topic %s: %v", id, err)
	}
	sub := &subscription{fake: f, topic: id, name: "projects/" + project + "/subscriptions/" + id + "-sub"}
	if _, err := f.client.SubscriptionAdminClient.CreateSubscription(t.Context(), &pb.Subscription{
		Name: sub.name, Topic: full, EnableMessageOrdering: true,
	}); err != nil {
		t.Fatalf("create subscription to %s: %v", id, err)
	}
	return sub
}

// options are a pubsub sink's options publishing to topic id on the fake.
func (f *fake) options(topic string) map[string]any {
	return map[string]any{"project": project, "topic": topic, "endpoint": f.srv.Addr}
}

// read pulls and acknowledges every message waiting on the subscription
// and returns all it received so far, in the order Pub/Sub delivered them.
func (s *subscription) read(t testing.TB) []brokertest.Received {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		req := &pb.PullRequest{Subscription: s.name, MaxMessages: 1000}
		//lint:ignore SA1019 without it the fake waits 500ms before answering "none"
		req.ReturnImmediately = true
		resp, err := s.fake.client.SubscriptionAdminClient.Pull(t.Context(), req)
		if err != nil {
			t.Fatalf("pull %s: %v", s.name, err)
		}
		if len(resp.ReceivedMessages) == 0 {
			return append([]brokertest.Received(nil), s.received...)
		}
		var acks []string
		for _, m := range resp.ReceivedMessages {
			acks = append(acks, m.AckId)
			s.received = append(s.received, brokertest.Received{
				ID: m.Message.Attributes[pubsubsink.DeliveryIDAttribute], Dest: s.topic,
				Payload: m.Message.Data, Headers: m.Message.Attributes, Key: m.Message.OrderingKey,
			})
		}
		if err := s.fake.client.SubscriptionAdminClient.Acknowledge(t.Context(), &pb.AcknowledgeRequest{Subscription: s.name, AckIds: acks}); err != nil {
			t.Fatalf("acknowledge on %s: %v", s.name, err)
		}
	}
}

// target is the pubsub sink publishing to the subscription's topic.
func (s *subscription) target() brokertest.Target {
	return brokertest.Target{Type: pubsubsink.Type.Name, Options: s.fake.options(s.topic), Read: s.read}
}

// build makes a pubsub sink through the registry, closed when the test
// ends.
func build(t testing.TB, name string, options map[string]any) sink.Sink {
	t.Helper()
	return brokertest.Target{Type: pubsubsink.Type.Name, Options: options}.Build(t, name)
}

// delivery is a delivery of sink "s" with the payload {"n": n}.
func delivery(key string, n int) *sink.Delivery {
	return &sink.Delivery{Sink: "s", DedupKey: key, Payload: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), Headers: map[string]string{}}
}
