package sinks

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

const (
	// MaxBodyExcerpt is how many bytes of an unsuccessful response's body
	// [ClassifyResponse] keeps in its error: enough for a receiver's error
	// message, too little to flood logs and the last_error column.
	MaxBodyExcerpt = 512
)

// ClassifyResponse maps an HTTP response to a delivery outcome:
//
//	2xx                                   nil (delivered)
//	429, 503 with a valid Retry-After     sink.RetryAfter (pause the sink, no attempt spent; capped at sink.MaxRetryAfter)
//	429, 503 without one                  retryable
//	408 Request Timeout                   retryable (the same request can succeed)
//	other 4xx (410 Gone among them)       sink.Permanent
//	3xx                                   sink.Permanent (redirects are not followed; fix the URL)
//	5xx and anything else                 retryable
//
// Unsuccessful outcomes carry the status and an excerpt of at most
// MaxBodyExcerpt bytes of the body. ClassifyResponse reads from resp.Body
// but does not close it; see [DiscardBody].
func ClassifyResponse(resp *http.Response) error {
	code := resp.StatusCode
	if code >= 200 && code <= 299 {
		return nil
	}
	// The status goes with the error, whatever its class, for the relay's
	// circuit breaker (see sink.HTTPStatus).
	err := sink.HTTPStatus(code, statusError(resp))
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return sink.RetryAfter(d, err)
		}
		return err
	case code == http.StatusRequestTimeout:
		return err
	case code >= 300 && code <= 499:
		return sink.Permanent(err)
	default:
		return err
	}
}

// statusError describes resp by its status line and a bounded, printable
// excerpt of its body.
func statusError(resp *http.Response) error {
	msg := "HTTP " + resp.Status
	if resp.Status == "" {
		msg = fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if resp.Body == nil {
		return errors.New(msg)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyExcerpt+1))
	if len(b) == 0 {
		return errors.New(msg)
	}
	truncated := len(b) > MaxBodyExcerpt
	if truncated {
		b = b[:MaxBodyExcerpt]
	}
	// Quoting keeps a multi-line or binary body on one printable line; a
	// UTF-8 sequence cut by the bound shows as \x escapes.
	excerpt := strconv.Quote(string(b))
	if truncated {
		excerpt += " (truncated)"
	}
	return fmt.Errorf("%s: body %s", msg, excerpt)
}

// ParseRetryAfter parses a Retry-After header value (RFC 9110 section
// 10.2.3): either delta-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2015
// 07:28:00 GMT"), which is turned into a delay from now. A date in the past
// means no delay. It reports false for an empty or malformed value.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if value[0] >= '0' && value[0] <= '9' {
		secs, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			// All digits but too large for 64 bits is still a valid, huge delay.
			var numErr *strconv.NumError
			if errors.As(err, &numErr) && errors.Is(numErr.Err, strconv.ErrRange) {
				return math.MaxInt64, true
			}
			return 0, false
		}
		if secs > math.MaxInt64/uint64(time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
