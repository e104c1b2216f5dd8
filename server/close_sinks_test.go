package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
)

type closingSink struct {
	sink.Func
	closed int
	err    error
}

func (s *closingSink) Close() error { s.closed++; return s.err }

// serve closes every sink that holds something (a broker connection) when
// it is done, and a failing Close does not keep the others open.
func TestCloseSinksClosesEveryCloser(t *testing.T) {
	a, b := &closingSink{err: errors.New("already gone")}, &closingSink{}
	plain := sink.Func(func(context.Context, *sink.Delivery) error { return nil })
	CloseSinks([]relay.SinkConfig{{Name: "a", Sink: a}, {Name: "plain", Sink: plain}, {Name: "b", Sink: b}},
		slog.New(slog.DiscardHandler))
	if a.closed != 1 || b.closed != 1 {
		t.Fatalf("closed a %d, b %d times; want once each", a.closed, b.closed)
	}
}
