package destinations_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/registry"
	sinkdest "github.com/outboxd/outboxd/sinks/destinations"
)

// busyFor is the wait a busy endpoint asks for, in whole seconds as
// Retry-After says it.
const busyFor = 7 * time.Second

// A destinations sink keeps the sink contract (package sinktest): each
// answer is a tenant's destination of its own, an httptest endpoint that
// accepts, fails, refuses, asks for a wait or never answers, which the
// delivery names in its destination header.
func TestDestinationsKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	store := ob.Destinations(keys)
	// destination creates a destination of tenant acme whose endpoint
	// answers status (0: never) and returns its id.
	destination := func(status int) (string, *endpoint) {
		e := newEndpoint(t, status)
		c, err := store.Create(t.Context(), pool, testdb.Actor, "acme", destinations.Spec{URL: e.URL, Events: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID, e
	}
	accepting, received := destination(http.StatusOK)
	// at sends a check's delivery to a destination answering status.
	at := func(status int, delay time.Duration) func(testing.TB) sinktest.Case {
		id, _ := destination(status)
		return func(testing.TB) sinktest.Case {
			return sinktest.Case{Alter: func(d *sink.Delivery) { d.Headers[destinations.Header] = id }, Delay: delay}
		}
	}
	dir, err := ob.Directory(keys, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resources := new(registry.Resources)
	resources.Publish(destinations.DirectoryResource, dir)
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink {
			s, err := sinkdest.Type.New(sinktest.SinkName, map[string]any{"allow_private": true}, sink.Env{Resources: resources})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Prepare:    func(d *sink.Delivery) { d.Headers[destinations.Header] = accepting },
		Received:   func(testing.TB) []string { return received.received() },
		Retryable:  at(http.StatusServiceUnavailable, 0),
		Permanent:  at(http.StatusBadRequest, 0),
		RetryAfter: at(http.StatusTooManyRequests, busyFor),
		Hang:       at(0, 0),
	})
}

// endpoint is a destination's httptest endpoint: it answers every request
// with one status (a 429 with a Retry-After of busyFor), or never when
// the status is 0, and records the webhook-id of those it answers.
type endpoint struct {
	*httptest.Server
	mu  sync.Mutex
	ids []string
}

// newEndpoint starts an endpoint answering status, closed when t ends.
func newEndpoint(t *testing.T, status int) *endpoint {
	e := &endpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a client giving up once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		if status == 0 {
			<-r.Context().Done()
			return
		}
		e.mu.Lock()
		e.ids = append(e.ids, r.Header.Get("webhook-id"))
		e.mu.Unlock()
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(int(busyFor/time.Second)))
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(e.Close)
	return e
}

// received returns the webhook-ids received so far.
func (e *endpoint) received() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ids)
}
