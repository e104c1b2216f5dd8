package slack_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// testChannel is the default channel the tests' sinks post to.
const testChannel = "C0TESTCHAN"

// testSinkName is the sink instance name the tests' deliveries carry.
const testSinkName = "alerts"

// newFake starts a fake Slack closed at the end of the test.
func newFake(t *testing.T) *fakeslack.Server {
	t.Helper()
	fake := fakeslack.New()
	t.Cleanup(fake.Close)
	return fake
}

// stoppedFake is a fake that has already shut down: connections to it are
// refused.
func stoppedFake() *fakeslack.Server {
	fake := fakeslack.New()
	fake.Close()
	return fake
}

// tokenOptions are options for a token-mode sink against fake, with extra
// options merged in.
func tokenOptions(fake *fakeslack.Server, extra map[string]any) map[string]any {
	o := map[string]any{"token": fakeslack.Token, "api_url": fake.APIURL(), "channel": testChannel}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

func newSink(t *testing.T, options map[string]any) *slack.Sink {
	t.Helper()
	return newSinkIn(t, options, sink.Env{})
}

// newSinkIn is newSink in the environment env.
func newSinkIn(t *testing.T, options map[string]any, env sink.Env) *slack.Sink {
	t.Helper()
	s, err := slack.Type.New(testSinkName, options, env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s.(*slack.Sink)
}

// delivery is a first attempt at row id with payload.
func delivery(id int64, key, payload string) *sink.Delivery {
	return &sink.Delivery{
		ID: id, Sink: testSinkName, DedupKey: key, Payload: json.RawMessage(payload),
		Attempt: 1, MaxAttempts: relay.DefaultMaxAttempts, CreatedAt: time.Now(),
	}
}

// retry turns d into a later, uncertain attempt.
func retry(d *sink.Delivery) *sink.Delivery {
	d.Attempt++
	d.Uncertain = true
	return d
}

func deliver(t *testing.T, s *slack.Sink, d *sink.Delivery) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Deliver(ctx, d)
}

// receipt decodes d's receipt.
func receipt(t *testing.T, d *sink.Delivery) map[string]string {
	t.Helper()
	var r map[string]string
	if d.Receipt() == nil {
		return nil
	}
	if err := json.Unmarshal(d.Receipt(), &r); err != nil {
		t.Fatalf("receipt %s: %v", d.Receipt(), err)
	}
	return r
}

// countRequests counts the fake's requests to method.
func countRequests(fake *fakeslack.Server, method string) int {
	n := 0
	for _, r := range fake.Requests() {
		if r.Method == method {
			n++
		}
	}
	return n
}

// outcome names an error's class for table tests.
func outcome(err error) string {
	if err == nil {
		return "sent"
	}
	if _, ok := sink.RetryAfterDelay(err); ok {
		return "retry_after"
	}
	if sink.IsPermanent(err) {
		return "permanent"
	}
	return "retry"
}
