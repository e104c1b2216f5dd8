package nats

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	natsio "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/core/sink"
)

// DefaultStreamFullPause is how long the sink pauses when the stream is
// full (a limit with the discard-new policy) or the server is short of
// resources: consumers must catch up first, and retrying sooner would only
// spend attempts.
const DefaultStreamFullPause = 5 * time.Second

// JetStream API error codes the sink tells apart (nats-server's
// errors.json). JSStreamStoreFailed carries "maximum messages exceeded"
// and the like when a full stream refuses new messages.
const (
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	errCodeStreamNotMatch        jetstream.ErrorCode = 10060
	errCodeStreamStoreFailed     jetstream.ErrorCode = 10077
)

// permanentErrors are client errors that no retry of the same message can
// fix.
var permanentErrors = []error{
	natsio.ErrMaxPayload, natsio.ErrBadSubject, natsio.ErrBadHeaderMsg,
	natsio.ErrAuthorization, natsio.ErrAuthExpired, natsio.ErrPermissionViolation,
	jetstream.ErrStreamNotFound, jetstream.ErrJetStreamNotEnabled, jetstream.ErrJetStreamNotEnabledForAccount,
}

// classify maps a failed publish to an outcome:
//
//	no stream covers the subject, a missing or other stream,
//	message too large, authorisation refused        sink.Permanent
//	stream full, server short of resources          sink.RetryAfter(DefaultStreamFullPause)
//	timeouts, lost connection, anything else        retryable
//
// A publish that no stream answered is permanent only when the server
// confirms that no stream covers the subject: without that, an unanswered
// publish may be a stream between leaders.
func (s *Sink) classify(ctx context.Context, c *conn, subject string, err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		if s.noStreamCovers(ctx, c, subject) {
			return sink.Permanent(fmt.Errorf("no stream covers subject %q", subject))
		}
		return err
	case errors.As(err, &apiErr):
		switch {
		case apiErr.ErrorCode == errCodeStreamNotMatch:
			return sink.Permanent(fmt.Errorf("subject %q is not stored by stream %q: %w", subject, s.cfg.Stream, err))
		case apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return sink.Permanent(err)
		case apiErr.ErrorCode == errCodeInsufficientResources,
			apiErr.ErrorCode == errCodeStreamStoreFailed && strings.Contains(apiErr.Description, "exceeded"),
			apiErr.Code == http.StatusServiceUnavailable:
			return sink.RetryAfter(DefaultStreamFullPause, err)
		}
	}
	for _, p := range permanentErrors {
		if errors.Is(err, p) {
			return sink.Permanent(err)
		}
	}
	return err
}

// noStreamCovers asks the server whether any stream stores subject.
func (s *Sink) noStreamCovers(ctx context.Context, c *conn, subject string) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, err := c.js.StreamNameBySubject(ctx, subject)
	return errors.Is(err, jetstream.ErrStreamNotFound)
}
