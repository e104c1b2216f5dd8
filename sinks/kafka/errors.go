package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outboxd/outboxd/core/sink"
)

// DefaultThrottlePause is how long the sink pauses when the cluster says
// its quota is exceeded: retrying sooner would only spend attempts.
const DefaultThrottlePause = 5 * time.Second

// permanentErrors are broker answers no retry of the same record can fix:
// the topic does not exist (after the client's own retries), the record is
// too large or invalid, or the principal may not write.
var permanentErrors = []error{
	kerr.UnknownTopicOrPartition, kerr.InvalidTopicException,
	kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
	kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.PolicyViolation,
}

// classify maps a failed produce to an outcome:
//
//	unknown topic, record too large or invalid,
//	authorisation refused                               sink.Permanent
//	throttling quota exceeded                           sink.RetryAfter(DefaultThrottlePause)
//	timeouts, unreachable brokers, anything else        retryable
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		return sink.RetryAfter(DefaultThrottlePause, err)
	}
	for _, p := range permanentErrors {
		if errors.Is(err, p) {
			return sink.Permanent(err)
		}
	}
	return err
}
