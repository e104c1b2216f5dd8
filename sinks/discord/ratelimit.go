package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks"
)

// The rate-limit headers Discord sends with every answer (its "Rate
// Limits" documentation): the bucket's size, what is left of it, when it
// refills (seconds, with a fraction) and the bucket's id.
const (
	HeaderLimit      = "X-RateLimit-Limit"
	HeaderRemaining  = "X-RateLimit-Remaining"
	HeaderResetAfter = "X-RateLimit-Reset-After"
	HeaderBucket     = "X-RateLimit-Bucket"
	HeaderScope      = "X-RateLimit-Scope"
)

// DefaultRetryAfter is how long the sink waits after a 429 that says
// neither in its body, nor in its headers, how long to wait (Cloudflare's
// plain 429s, in front of Discord, say nothing).
const DefaultRetryAfter = 30 * time.Second

// maxRateLimitBody bounds how much of a 429's body the sink reads for its
// retry_after: Discord's answer is a small JSON object.
const maxRateLimitBody = 4 << 10

// bucket is the webhook's rate-limit bucket as Discord last announced it.
// Discord counts requests past an empty bucket (429s) among the invalid
// requests for which Cloudflare bans an address for an hour (10,000 in 10
// minutes), so the sink does not send while the bucket is empty: it asks
// the relay to come back when Discord said it refills.
type bucket struct {
	mu        sync.Mutex
	remaining int       // requests left until resetAt
	resetAt   time.Time // zero: nothing announced yet
}

// take reserves a request: it returns 0 when the request may go, or how
// long until the bucket refills. Concurrent deliveries of this process
// share what is left.
func (b *bucket) take(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !now.Before(b.resetAt) {
		return 0
	}
	if b.remaining <= 0 {
		return b.resetAt.Sub(now)
	}
	b.remaining--
	return 0
}

// observe records what an answer's headers say of the bucket; an answer
// without them (a proxy's) changes nothing.
func (b *bucket) observe(h http.Header, now time.Time) {
	remaining, err := strconv.Atoi(h.Get(HeaderRemaining))
	if err != nil {
		return
	}
	after, ok := parseSeconds(h.Get(HeaderResetAfter))
	if !ok {
		return
	}
	b.set(remaining, now.Add(after))
}

// set records that remaining requests are left until resetAt.
func (b *bucket) set(remaining int, resetAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remaining, b.resetAt = remaining, resetAt
}

// errBucketEmpty is the outcome of a delivery the sink held back.
var errBucketEmpty = errors.New("the webhook's rate-limit bucket is empty until Discord's announced reset: not sent")

// parseSeconds parses Discord's seconds with a fraction ("1.25"),
// rounded up to the millisecond, as a non-negative duration.
func parseSeconds(v string) (time.Duration, bool) {
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	return seconds(secs)
}

// seconds turns Discord's seconds into a duration, rounded up to the
// millisecond and at most sink.MaxRetryAfter; false for a negative or
// not-a-number value.
func seconds(secs float64) (time.Duration, bool) {
	if math.IsNaN(secs) || secs < 0 {
		return 0, false
	}
	if secs > sink.MaxRetryAfter.Seconds() {
		return sink.MaxRetryAfter, true
	}
	return time.Duration(math.Ceil(secs*1000)) * time.Millisecond, true
}

// rateLimitBody is the JSON body of Discord's 429.
type rateLimitBody struct {
	Message    string  `json:"message"`
	RetryAfter float64 `json:"retry_after"`
	Global     bool    `json:"global"`
}

// rateLimited turns Discord's 429 into sink.RetryAfter, waiting what
// Discord asked for, most precisely said first: the body's retry_after
// (seconds with a fraction), X-RateLimit-Reset-After, the Retry-After
// header (whole seconds), else DefaultRetryAfter. A global limit (the
// body's global) is named in the error.
func rateLimited(resp *http.Response, now time.Time) error {
	var body rateLimitBody
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxRateLimitBody))
	_ = json.Unmarshal(raw, &body) // a proxy's 429 may not be JSON
	wait, ok := seconds(body.RetryAfter)
	if !ok || wait == 0 {
		wait, ok = parseSeconds(resp.Header.Get(HeaderResetAfter))
	}
	if !ok || wait == 0 {
		wait, ok = sinks.ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	if !ok {
		wait = DefaultRetryAfter
	}
	scope := "the webhook's"
	if body.Global {
		scope = "the global"
	} else if s := resp.Header.Get(HeaderScope); s != "" {
		scope = "the " + strconv.Quote(s)
	}
	err := fmt.Errorf("HTTP %d: %s rate limit, retry after %s", resp.StatusCode, scope, wait)
	return sink.RetryAfter(wait, sink.HTTPStatus(resp.StatusCode, err))
}
