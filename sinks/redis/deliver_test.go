package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	redissink "github.com/outboxd/outboxd/sinks/redis"
)

// receipt returns the receipt a delivery recorded.
func receipt(t testing.TB, d *sink.Delivery) redissink.Receipt {
	t.Helper()
	var r redissink.Receipt
	if err := json.Unmarshal(d.Receipt(), &r); err != nil {
		t.Fatalf("receipt %s: %v", d.Receipt(), err)
	}
	return r
}

// A row delivered again (its first attempt's relay died before marking it
// sent) adds no second entry: the script finds the delivery id's key and
// answers the first entry's id, and the key expires after the window.
// Mutation: dropping the GET of the key from addonce.lua adds a second
// entry; dropping PX from its SET leaves the key without a TTL.
func TestRedeliveryWithinTheWindowAddsNoSecondEntry(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	o := sp.options(url, "events")
	o["dedup_window"] = "1h"
	s := build(t, "s", o)
	first, again := delivery("k1", 1), delivery("k1", 1)
	again.Attempt, again.Uncertain = 2, true
	for _, d := range []*sink.Delivery{first, again} {
		if err := s.Deliver(t.Context(), d); err != nil {
			t.Fatalf("attempt %d: %v", d.Attempt, err)
		}
	}
	if got := sp.entries(t, "events"); len(got) != 1 || got[0].ID != "s/k1" || string(got[0].Payload) != `{"n":1}` {
		t.Fatalf("stream holds %+v, want the one entry of s/k1", got)
	}
	r1, r2 := receipt(t, first), receipt(t, again)
	if r1.Duplicate || !r2.Duplicate || r1.ID != r2.ID || r1.ID == "" || r1.Stream != sp.prefix+"events" {
		t.Errorf("receipts %+v then %+v: want one entry id, the second a duplicate", r1, r2)
	}
	ttl, err := sp.client.PTTL(t.Context(), sp.prefix+"dedup:s/k1").Result()
	if err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("the delivery id's key expires in %s (%v), want within the 1h window", ttl, err)
	}
	// Another delivery id is another entry.
	if err := s.Deliver(t.Context(), delivery("k2", 2)); err != nil {
		t.Fatal(err)
	}
	if n := len(sp.entries(t, "events")); n != 2 {
		t.Errorf("stream holds %d entries after a second delivery id, want 2", n)
	}
}

// maxlen trims the stream approximately (XADD MAXLEN ~): it stays far
// below the number of entries added and at or above maxlen; fields adds
// the configured fields, rendered per message.
// Mutation: passing maxlen 0 to the script leaves all 300 entries.
func TestMaxLenTrimsAndFieldsRender(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	o := sp.options(url, "trimmed")
	o["maxlen"] = 10
	o["fields"] = map[string]any{"key": "{{.DedupKey}}", "tenant": `{{index .Headers "x-tenant"}}`}
	s := build(t, "s", o)
	const added = 300
	for i := range added {
		d := delivery("t"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i), i)
		d.Headers["x-tenant"] = "acme"
		if err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	n, err := sp.client.XLen(t.Context(), sp.prefix+"trimmed").Result()
	if err != nil || n < 10 || n >= added {
		t.Errorf("stream holds %d entries (%v) after %d with maxlen 10, want trimmed to about 10", n, err, added)
	}
	last, err := sp.client.XRevRangeN(t.Context(), sp.prefix+"trimmed", "+", "-", 1).Result()
	if err != nil || len(last) != 1 {
		t.Fatalf("last entry: %v %v", last, err)
	}
	if v := last[0].Values; v["key"] != "t299" || v["tenant"] != "acme" {
		t.Errorf("last entry's fields %v, want key t299 and tenant acme", v)
	}
}

// A stream template that renders an empty key, or names a header the
// message lacks, fails that message permanently, and adds nothing.
// Mutation: returning the render error unwrapped makes it retryable.
func TestUnroutableMessageIsPermanent(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	s := build(t, "s", map[string]any{"url": url, "stream": "{{.OrderingKey}}", "dedup_prefix": sp.prefix + "dedup:"})
	header := build(t, "s", sp.options(url, "{{.Headers.missing}}"))
	for name, s := range map[string]sink.Sink{"empty key": s, "missing header": header} {
		err := s.Deliver(t.Context(), delivery("bad", 1))
		if err == nil || !sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
	if keys, _ := sp.client.Keys(t.Context(), sp.prefix+"*").Result(); len(keys) != 0 {
		t.Errorf("an unroutable message left keys %v", keys)
	}
}

// A server that is down fails the delivery retryably, without quoting the
// password of the URL or of the options.
// Mutation: wrapping connect errors with sink.Permanent fails it.
func TestServerDownIsRetryableAndQuotesNoSecret(t *testing.T) {
	t.Parallel()
	const password = "s3cret-pass"
	url := strings.Replace(closedURL(t), "redis://", "redis://u:"+password+"@", 1)
	for name, o := range map[string]map[string]any{
		"url":     {"url": url, "stream": "x", "connect_timeout": "1s"},
		"options": {"url": closedURL(t), "stream": "x", "connect_timeout": "1s", "username": "u", "password": password},
	} {
		err := build(t, "s", o).Deliver(t.Context(), delivery("k", 1))
		if err == nil || sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a retryable error", name, err)
		}
		if _, paused := sink.RetryAfterDelay(err); paused {
			t.Errorf("%s: %v pauses the sink; a server that is down is retried", name, err)
		}
		if err != nil && strings.Contains(err.Error(), password) {
			t.Errorf("%s: error quotes the password: %v", name, err)
		}
	}
}

// A delivery whose context has ended fails at once, retryably.
func TestEndedContextIsRetryable(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	s := build(t, "s", sp.options(url, "events"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Deliver(ctx, delivery("k", 1))
	if err == nil || sink.IsPermanent(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("Deliver with an ended context: %v, want a retryable context error", err)
	}
}

// Options a sink cannot run with are refused at start-up, naming the
// option and never quoting the password.
func TestBadOptionsAreRefused(t *testing.T) {
	t.Parallel()
	brokertest.CheckBadOptions(t, redissink.Type.Name, "pw", []brokertest.BadOptions{
		{Name: "no url", Options: map[string]any{"stream": "x"}, Want: "option url: is required"},
		{Name: "not redis", Options: map[string]any{"url": "http://u:pw@h", "stream": "x"}, Want: "option url: not a redis://"},
		{Name: "no stream", Options: map[string]any{"url": "redis://h"}, Want: "option stream: is required"},
		{Name: "bad template", Options: map[string]any{"url": "redis://h", "stream": "{{.Nope}}"}, Want: "option stream: not a valid template"},
		{Name: "reserved field", Options: map[string]any{"url": "redis://h", "stream": "x", "fields": map[string]any{"id": "x"}}, Want: "option fields"},
		{Name: "negative maxlen", Options: map[string]any{"url": "redis://h", "stream": "x", "maxlen": -1}, Want: "option maxlen"},
		{Name: "no window", Options: map[string]any{"url": "redis://h", "stream": "x", "dedup_window": "0s"}, Want: "option dedup_window"},
		{Name: "timeout", Options: map[string]any{"url": "redis://:pw@h", "stream": "x", "timeout": "0s"}, Want: "option timeout"},
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
