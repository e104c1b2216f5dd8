package sinktest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
)

// hookSink is a custom sink: it POSTs each payload to its URL with the
// delivery id as the Idempotency-Key, and classifies the answer.
type hookSink struct{ url string }

func (s hookSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(d.Payload))
	if err != nil {
		return sink.Permanent(err)
	}
	req.Header.Set("Idempotency-Key", d.DeliveryID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err // the receiver may come back: retry
	}
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code < 300:
		return nil
	case code == http.StatusTooManyRequests:
		seconds, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return sink.RetryAfter(time.Duration(seconds)*time.Second, errors.New(resp.Status))
	case code >= 500:
		return errors.New(resp.Status)
	default:
		return sink.Permanent(errors.New(resp.Status))
	}
}

// receiver is the sink's test destination: it answers with status (and
// Retry-After when it is 429), or never when hang is set, and records
// the Idempotency-Key of each request it takes.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

// newReceiver starts a receiver, closed when t ends.
func newReceiver(t testing.TB, status int, hang bool) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang {
			// The server notices the client giving up once the body is read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		rc.mu.Lock()
		rc.keys = append(rc.keys, r.Header.Get("Idempotency-Key"))
		rc.mu.Unlock()
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// received returns the Idempotency-Keys received so far.
func (rc *receiver) received(testing.TB) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.keys)
}

// A sink's test hands Run a harness that builds the sink against its
// receiver and can make the receiver fail in each way; the kit checks
// every part of the contract the sink implements. In a sink's test, t is
// its *testing.T and each check is a subtest; here a recorder stands in,
// so that the example prints what the kit says: hookSink keeps the
// contract, and implements none of the optional interfaces.
func ExampleRun() {
	t := &recorder{}
	accepting := newReceiver(t, http.StatusOK, false)
	// answering arranges a receiver of its own answering status; delay
	// is the wait a 429 asks for.
	answering := func(status int, delay time.Duration) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: hookSink{url: newReceiver(t, status, false).URL}, Delay: delay}
		}
	}
	sinktest.Run(t, sinktest.Harness{
		New:        func(testing.TB) sink.Sink { return hookSink{url: accepting.URL} },
		Received:   accepting.received,
		Retryable:  answering(http.StatusServiceUnavailable, 0),
		Permanent:  answering(http.StatusBadRequest, 0),
		RetryAfter: answering(http.StatusTooManyRequests, 7*time.Second),
		Hang: func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: hookSink{url: newReceiver(t, 0, true).URL}}
		},
	})
	for _, line := range t.finish() {
		fmt.Println(line)
	}
	// Output:
	// sinktest: skipped Close: the sink is not an io.Closer
	// sinktest: skipped DeliverBatch: the sink is not a sink.BatchSink
	// sinktest: skipped DeliverDigest: the sink is not a sink.DigestSink
	// sinktest: skipped Check: the sink is not a sink.Checker
}
