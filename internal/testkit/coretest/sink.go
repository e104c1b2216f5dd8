package coretest

import (
	"context"
	"sync"

	"github.com/outboxd/outboxd/core/sink"
)

// RecordingSink is a sink that remembers every delivery, in the order they
// started, and signals each one.
type RecordingSink struct {
	// Fail, if not nil, is asked first about each delivery: an error it
	// returns is the delivery's, and the delivery is not recorded. Set it
	// before the relay starts.
	Fail func(d *sink.Delivery) error
	// Signal receives a value after a delivery is recorded (at most one
	// waits: deliveries while one is pending do not block).
	Signal chan struct{}

	mu        sync.Mutex
	delivered []sink.Delivery
}

// NewRecordingSink returns a RecordingSink where every delivery succeeds.
func NewRecordingSink() *RecordingSink {
	return &RecordingSink{Signal: make(chan struct{}, 1)}
}

// Deliver records d unless Fail refuses it.
func (s *RecordingSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	if s.Fail != nil {
		if err := s.Fail(d); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.delivered = append(s.delivered, *d)
	s.mu.Unlock()
	select {
	case s.Signal <- struct{}{}:
	default:
	}
	return nil
}

// Snapshot returns a copy of the deliveries recorded so far.
func (s *RecordingSink) Snapshot() []sink.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sink.Delivery(nil), s.delivered...)
}
