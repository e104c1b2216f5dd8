package sink_test

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
)

// ticketSink opens a ticket at a receiver that takes no idempotency key,
// so on an Uncertain delivery it looks for the ticket an earlier attempt
// may have opened before opening one.
type ticketSink struct {
	opened map[string]bool // the receiver's tickets, by dedup key
}

func (s *ticketSink) Deliver(_ context.Context, d *sink.Delivery) error {
	if d.Uncertain && s.opened[d.DedupKey] {
		return nil // the earlier attempt went through
	}
	s.opened[d.DedupKey] = true
	return nil
}

// ChecksUncertain asks the relay to claim this sink's rows durably: a
// claim a PostgreSQL crash forgot would bring the row back as a first
// attempt, not Uncertain, and the look above would not run.
func (s *ticketSink) ChecksUncertain() bool { return true }

func ExampleUncertainChecker() {
	var s sink.Sink = &ticketSink{opened: map[string]bool{}}
	c, ok := s.(sink.UncertainChecker)
	fmt.Println(ok && c.ChecksUncertain())
	// Output: true
}
