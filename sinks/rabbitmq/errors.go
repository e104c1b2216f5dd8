package rabbitmq

import (
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxd/outboxd/core/sink"
)

// DefaultRefusedPause is how long the sink pauses when the broker blocks
// publishing (a memory or disk alarm) or refuses a message with
// basic.nack (a full queue that rejects publishes): it says "not now", and
// retrying sooner would only spend attempts.
const DefaultRefusedPause = 5 * time.Second

// unroutableError is a mandatory message the broker returned because no
// queue is bound for its routing key.
type unroutableError struct {
	code                 uint16
	text                 string
	exchange, routingKey string
}

func (e *unroutableError) Error() string {
	return fmt.Sprintf("unroutable: exchange %q has no queue bound for routing key %q (%d %s)", e.exchange, e.routingKey, e.code, e.text)
}

// blockedError is a publish refused while the broker blocks the
// connection.
type blockedError struct{ reason string }

func (e *blockedError) Error() string { return "the broker blocks publishing: " + e.reason }

// permanentCodes are AMQP reply codes that no retry of the same message
// can fix: the exchange does not exist (404), the user may not publish to
// it (403), or the message breaks a rule of it (406).
var permanentCodes = map[int]bool{amqp.NotFound: true, amqp.AccessRefused: true, amqp.PreconditionFailed: true}

// classify maps a failed publish to an outcome:
//
//	unroutable (returned), missing exchange, access refused,
//	precondition failed                                  sink.Permanent
//	connection blocked by an alarm, basic.nack           sink.RetryAfter(DefaultRefusedPause)
//	no confirm in time, connection lost, anything else   retryable
func classify(err error) error {
	var (
		unroutable *unroutableError
		blocked    *blockedError
		amqpErr    *amqp.Error
	)
	switch {
	case errors.As(err, &unroutable):
		return sink.Permanent(err)
	case errors.As(err, &blocked), errors.Is(err, errNacked):
		return sink.RetryAfter(DefaultRefusedPause, err)
	case errors.As(err, &amqpErr) && permanentCodes[amqpErr.Code]:
		return sink.Permanent(err)
	}
	return err
}
