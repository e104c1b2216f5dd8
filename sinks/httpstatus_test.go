package sinks_test

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/netguard"
	"github.com/outboxd/outboxd/sinks"
)

// outcome names what a delivery error asks the relay to do, and the delay
// of a retry-after. The delay is rounded up to whole seconds: an HTTP-date
// has no fraction, so "now + 1 minute" arrives as a little under a minute.
func outcome(err error) string {
	switch d, ok := sink.RetryAfterDelay(err); {
	case err == nil:
		return "sent"
	case ok:
		return "retry-after " + (d + time.Second - 1).Truncate(time.Second).String()
	case sink.IsPermanent(err):
		return "permanent"
	}
	return "retry"
}

func response(code int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		StatusCode: code,
		Status:     strconv.Itoa(code) + " " + http.StatusText(code),
		Header:     header,
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

func TestClassifyResponse(t *testing.T) {
	t.Parallel()
	// A whole second from now plus one minute: the delay is a minute and a
	// fraction of a second, however long the test takes to get there.
	inAMinute := time.Now().Truncate(time.Second).Add(time.Minute + time.Second).UTC().Format(http.TimeFormat)
	ra := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	tests := []struct {
		code   int
		header http.Header
		want   string
	}{
		{200, nil, "sent"},
		{201, nil, "sent"},
		{202, nil, "sent"},
		{204, nil, "sent"},
		{299, nil, "sent"},
		{301, nil, "permanent"},
		{302, nil, "permanent"},
		{307, nil, "permanent"},
		{400, nil, "permanent"},
		{401, nil, "permanent"},
		{403, nil, "permanent"},
		{404, nil, "permanent"},
		{408, nil, "retry"},
		{410, nil, "permanent"},
		{410, ra("30"), "permanent"},
		{413, nil, "permanent"},
		{422, nil, "permanent"},
		{429, nil, "retry"},
		{429, ra("30"), "retry-after 30s"},
		{429, ra(" 0 "), "retry-after 0s"},
		{429, ra(inAMinute), "retry-after 1m1s"},
		{429, ra("Wed, 21 Oct 2015 07:28:00 GMT"), "retry-after 0s"}, // in the past
		{429, ra("soon"), "retry"},
		{429, ra("-5"), "retry"},
		{429, ra("99999999999999999999999"), "retry-after 1h0m0s"}, // capped
		{500, nil, "retry"},
		{500, ra("30"), "retry"},
		{502, nil, "retry"},
		{503, nil, "retry"},
		{503, ra("120"), "retry-after 2m0s"},
		{503, ra(inAMinute), "retry-after 1m1s"},
		{504, nil, "retry"},
		{599, nil, "retry"},
	}
	for _, tt := range tests {
		err := sinks.ClassifyResponse(response(tt.code, tt.header, "nope"))
		if got := outcome(err); got != tt.want {
			t.Errorf("%d %v: %s (%v), want %s", tt.code, tt.header, got, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Itoa(tt.code)) {
			t.Errorf("%d: error %q does not name the status", tt.code, err)
		}
	}
}

func TestClassifyResponseBodyExcerpt(t *testing.T) {
	t.Parallel()
	err := sinks.ClassifyResponse(response(400, nil, "bad field\n\"x\""))
	if want := `body "bad field\n\"x\""`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to quote the body as %s", err, want)
	}

	long := strings.Repeat("a", sinks.MaxBodyExcerpt) + "TAIL"
	err = sinks.ClassifyResponse(response(500, nil, long))
	msg := err.Error()
	if strings.Contains(msg, "TAIL") || !strings.Contains(msg, "(truncated)") {
		t.Errorf("error %q is not cut at %d body bytes", msg, sinks.MaxBodyExcerpt)
	}
	if len(msg) > sinks.MaxBodyExcerpt+100 {
		t.Errorf("error is %d bytes long, want about %d", len(msg), sinks.MaxBodyExcerpt)
	}

	if err := sinks.ClassifyResponse(response(404, nil, "")); err.Error() != "permanent: HTTP 404 Not Found" {
		t.Errorf("empty body: error %q", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{"  7 ", 7 * time.Second, true},
		{"9223372037", math.MaxInt64, true},              // seconds beyond a Duration
		{"99999999999999999999999", math.MaxInt64, true}, // beyond 64 bits
		{"-1", 0, false},
		{"1.5", 0, false},
		{"12abc", 0, false},
		{"Sun, 01 Mar 2026 12:01:30 GMT", 90 * time.Second, true},  // IMF-fixdate
		{"Sunday, 01-Mar-26 12:00:10 GMT", 10 * time.Second, true}, // RFC 850
		{"Sun Mar  1 12:00:05 2026", 5 * time.Second, true},        // asctime
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true},                 // past
		{"Sun, 01 Mar 2026 12:01:30 +0100", 0, false},              // not an HTTP-date
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		got, ok := sinks.ParseRetryAfter(tt.value, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", tt.value, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestTransportErrorIsRetryable(t *testing.T) {
	t.Parallel()
	client := netguard.NewHTTPClient(netguard.HTTPClientOptions{AllowPrivate: true, Timeout: 50 * time.Millisecond})
	// Nothing listens on port 1 of the loopback address: connection refused.
	_, err := client.Get("http://127.0.0.1:1/secret-path")
	err = sinks.TransportError(err)
	if err == nil || sink.IsPermanent(err) || errors.Is(err, netguard.ErrNonPublicAddress) {
		t.Fatalf("connection refused gave %v, want a plain retryable error", err)
	}
	if strings.Contains(err.Error(), "secret-path") {
		t.Errorf("error %q leaks the URL", err)
	}
	if sinks.TransportError(nil) != nil {
		t.Error("TransportError(nil) != nil")
	}
}
