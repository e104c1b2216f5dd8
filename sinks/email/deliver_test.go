package email

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxd/outboxd/core/sink"
)

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func delivery(key, payload string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "mail", DedupKey: key, Payload: json.RawMessage(payload), Attempt: 1, MaxAttempts: 5}
}

func TestDeliverBadPayloadIsPermanent(t *testing.T) {
	t.Parallel()
	// The server is unreachable: a payload error must be reported before any
	// connection is attempted.
	s, err := newTestSink("mail", Options{SMTP: closedAddr(t), TLS: TLSNone, From: "outbox@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{`{"text":"hi"}`, `{"to":"a@example.com"}`, `{"text":"hi","to":"@"}`} {
		err := s.Deliver(context.Background(), delivery("k", payload))
		if !sink.IsPermanent(err) || !strings.Contains(err.Error(), `email sink "mail"`) {
			t.Errorf("payload %s: error = %v, want a permanent error naming the sink", payload, err)
		}
	}
}

func TestDeliverConnectionRefusedIsRetryableAndTraced(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s, err := newSink("mail", Options{
		SMTP: closedAddr(t), TLS: TLSNone, From: "outbox@example.com",
		Username: "user", Password: "hunter2",
	}, sink.Env{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.Deliver(ctx, delivery("k", `{"text":"hi","to":["a@example.com"],"cc":["b@example.com"]}`))
	if err == nil || sink.IsPermanent(err) {
		t.Fatalf("error = %v, want a retryable error", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %q reveals the password", err)
	}

	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != spanName {
		t.Fatalf("spans = %v, want one %q span", spans, spanName)
	}
	span := spans[0]
	if span.Status().Code != codes.Error {
		t.Errorf("span status = %v, want Error", span.Status())
	}
	attrs := map[string]string{}
	for _, kv := range span.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
		if strings.Contains(kv.Value.String(), "hunter2") {
			t.Errorf("span attribute %s reveals the password", kv.Key)
		}
	}
	if attrs["server.address"] != "127.0.0.1" || attrs["outboxd.email.recipients"] != "2" {
		t.Errorf("span attributes = %v, want server.address 127.0.0.1 and 2 recipients", attrs)
	}
	if want := MessageID("mail", "k", "example.com"); attrs["outboxd.email.message_id"] != want {
		t.Errorf("span message id = %q, want %q", attrs["outboxd.email.message_id"], want)
	}
}
