package slack

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks"
)

// DefaultRetryAfter is how long a sink waits after a 429, or an ok:false
// "ratelimited", that names no Retry-After.
const DefaultRetryAfter = 30 * time.Second

// permanentErrors are Slack error codes that no retry of the same message
// can fix: the channel, the credentials or the message itself are wrong.
// Other codes (internal_error, fatal_error, service_unavailable, codes Slack
// adds later) are retried: a needless retry ends in the dead-letter queue
// after max_attempts, while a wrongly permanent error loses a message now.
var permanentErrors = map[string]bool{
	"access_denied":           true,
	"account_inactive":        true,
	"as_user_not_supported":   true,
	"cannot_reply_to_message": true,
	"channel_is_archived":     true,
	"channel_not_found":       true,
	"ekm_access_denied":       true,
	"invalid_arguments":       true,
	"invalid_auth":            true,
	"invalid_blocks":          true,
	"invalid_blocks_format":   true,
	"invalid_metadata_format": true,
	"invalid_metadata_schema": true,
	"is_archived":             true,
	"messages_tab_disabled":   true,
	"metadata_too_large":      true,
	"missing_scope":           true,
	"msg_too_long":            true,
	"no_permission":           true,
	"no_text":                 true,
	"not_allowed_token_type":  true,
	"not_authed":              true,
	"not_in_channel":          true,
	"org_login_required":      true,
	"restricted_action":       true,
	"team_access_not_granted": true,
	"thread_not_found":        true,
	"token_expired":           true,
	"token_revoked":           true,
	"too_many_attachments":    true,
	"user_not_found":          true,
}

// classify turns a slack-go error into a delivery outcome: nil, RetryAfter,
// Permanent, or a plain (retryable) error. what names the call for the
// message, e.g. "chat.postMessage to C0123".
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	wrapped := fmt.Errorf("%s: %w", what, err)

	var rateLimited *slackapi.RateLimitedError
	var status slackapi.StatusCodeError
	var slackErr slackapi.SlackErrorResponse
	switch {
	case errors.As(err, &rateLimited):
		return sink.RetryAfter(rateLimited.RetryAfter, wrapped)
	case errors.As(err, &status):
		return classifyStatus(status.Code, wrapped)
	case errors.As(err, &slackErr):
		switch {
		case slackErr.Err == "ratelimited":
			return sink.RetryAfter(DefaultRetryAfter, wrapped)
		case permanentErrors[slackErr.Err]:
			return sink.Permanent(wrapped)
		}
	}
	// Timeouts, refused connections, 200 answers with a broken body, unknown
	// Slack error codes: try again later. TransportError also drops the
	// request URL, since an incoming-webhook URL is a secret.
	return fmt.Errorf("%s: %w", what, sinks.TransportError(err))
}

// classifyStatus maps an HTTP status without a usable Retry-After. The
// error carries the status (sink.HTTPStatus) whatever its class, so that
// the relay's breaker tells an outage (502, 503, 504, 408) from a failure
// of the message: an untagged 503 counted as a plain error, and a row's
// last attempt was spent on an outage before the breaker could act
// (issue 40 item 7).
func classifyStatus(code int, err error) error {
	err = sink.HTTPStatus(code, err)
	switch {
	case code == http.StatusTooManyRequests:
		return sink.RetryAfter(DefaultRetryAfter, err)
	case code == http.StatusRequestTimeout, code >= 500:
		return err
	case code >= 400:
		// The API URL is wrong, or the webhook was removed (404, 410) or is
		// forbidden (403): the same request cannot succeed later.
		return sink.Permanent(err)
	}
	return err
}
