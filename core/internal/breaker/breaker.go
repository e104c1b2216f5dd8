// Package breaker is the pure logic of the relay's circuit breakers: what a
// delivery's outcome says about its receiver (Classify: the sink, or one
// rate key of a sink limited per key), and when a run of such outcomes
// means the receiver is unwell (Window). The state a cluster shares (open,
// probing, closed) lives in PostgreSQL and is the relay's business; this
// package keeps no clock and does no I/O.
package breaker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// Signal is what one delivery's outcome says about its receiver.
type Signal int

const (
	// Neutral says nothing: the relay was shutting down.
	Neutral Signal = iota
	// Answered: the receiver took the message, or refused this message
	// for a reason of its own (a permanent 4xx): it is up.
	Answered
	// ServerError is a failure that may be the message's as much as the
	// receiver's (a 500, an unknown error): only a high share of them
	// over a window opens the breaker.
	ServerError
	// Down is a failure that says the receiver is unwell whatever the
	// message: the connection was refused or reset, the name did not
	// resolve, TLS failed, the answer did not come in time, or a 502, 503
	// or 504.
	Down
	// Deferred is a Retry-After (or a 429 without one): repeated, it opens
	// the breaker like Down, so a receiver that answers 429 forever gets one
	// probe per probe interval instead of one request per message.
	Deferred
)

// String names s as logs and reasons show it.
func (s Signal) String() string {
	switch s {
	case Answered:
		return "answered"
	case ServerError:
		return "server error"
	case Down:
		// Kept for compatibility, as breakers' reasons in events and the
		// console quote it: "destination" means a receiver here.
		return "destination down"
	case Deferred:
		return "retry-after"
	}
	return "neutral"
}

// Classify says what a delivery's error says about its receiver. It
// reads the error's chain (sink.RetryAfter, sink.Permanent, sink.HTTPStatus
// and the standard library's network errors), never its text.
func Classify(err error) Signal {
	if err == nil {
		return Answered
	}
	if _, ok := sink.RetryAfterDelay(err); ok {
		return Deferred
	}
	if code, ok := sink.StatusCode(err); ok {
		switch {
		case code == http.StatusTooManyRequests:
			return Deferred
		case code == http.StatusBadGateway || code == http.StatusServiceUnavailable ||
			code == http.StatusGatewayTimeout || code == http.StatusRequestTimeout:
			return Down
		case code >= 500:
			return ServerError
		}
		return Answered
	}
	if sink.IsPermanent(err) {
		return Answered
	}
	if errors.Is(err, context.Canceled) {
		return Neutral
	}
	if unreachable(err) {
		return Down
	}
	return ServerError
}

// unreachable reports whether err is a network failure to reach the
// receiver or get its answer.
func unreachable(err error) bool {
	var (
		netErr   net.Error
		opErr    *net.OpError
		dnsErr   *net.DNSError
		tlsRec   tls.RecordHeaderError
		tlsAlert tls.AlertError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF):
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &tlsRec), errors.As(err, &tlsAlert),
		errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname):
		return true
	}
	return false
}

// Thresholds say when a receiver's outcomes open its breaker.
type Thresholds struct {
	// Consecutive Down or Deferred outcomes, with no Answered between them.
	Consecutive int
	// Ratio of failures (ServerError, Down, Deferred) among at least
	// MinDeliveries outcomes within Window.
	Ratio         float64
	MinDeliveries int
	Window        time.Duration
}

// buckets is how many slices Window's span is counted in: the window
// slides by a tenth of its span.
const buckets = 10

// Window counts one receiver's recent outcomes on one relay. It is not
// safe for concurrent use; the zero value is empty.
type Window struct {
	consecutive int
	last        Signal
	slots       [buckets]slot
}

type slot struct {
	at             int64 // the slot's index since the epoch, in widths
	total, failing int
}

// Record adds an outcome seen at now and reports whether the breaker
// should open, and why. After it reports true the window starts empty.
func (w *Window) Record(s Signal, now time.Time, t Thresholds) (bool, string) {
	if s == Neutral {
		return false, ""
	}
	failing := s != Answered
	switch s {
	case Answered:
		w.consecutive = 0
	case Down, Deferred:
		w.consecutive++
		w.last = s
	}
	width := max(t.Window/buckets, time.Millisecond)
	at := now.UnixNano() / int64(width)
	sl := &w.slots[at%buckets]
	if sl.at != at {
		*sl = slot{at: at}
	}
	sl.total++
	if failing {
		sl.failing++
	}
	if t.Consecutive > 0 && w.consecutive >= t.Consecutive {
		reason := fmt.Sprintf("%d consecutive failures (%s)", w.consecutive, w.last)
		*w = Window{}
		return true, reason
	}
	if !failing || t.MinDeliveries <= 0 || t.Ratio <= 0 {
		return false, ""
	}
	total, fails := 0, 0
	for _, c := range w.slots {
		if at-c.at < buckets {
			total, fails = total+c.total, fails+c.failing
		}
	}
	if total >= t.MinDeliveries && float64(fails) >= t.Ratio*float64(total) {
		reason := fmt.Sprintf("%d of the last %d deliveries failed within %s", fails, total, t.Window)
		*w = Window{}
		return true, reason
	}
	return false, ""
}

// Idle reports whether w holds nothing that could open a breaker: no
// consecutive failures and no failure within the window ending at now.
func (w *Window) Idle(now time.Time, t Thresholds) bool {
	if w.consecutive > 0 {
		return false
	}
	at := now.UnixNano() / int64(max(t.Window/buckets, time.Millisecond))
	for _, c := range w.slots {
		if at-c.at < buckets && c.failing > 0 {
			return false
		}
	}
	return true
}
