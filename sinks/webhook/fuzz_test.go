package webhook_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// FuzzWebhookDeliver sends arbitrary payload bytes under arbitrary dedup keys
// to a verifying receiver. Every delivery must either arrive byte for byte,
// under webhook-id "hook/<key>" (the delivery id; it was the bare key
// before ids were made unique across sinks) and with a signature the independent
// verifier accepts for each rotated secret, or fail permanently without
// sending anything. The seed corpus is in testdata/fuzz/FuzzWebhookDeliver.
// (Mutation: signing half the body fails this target on its seeds.)
func FuzzWebhookDeliver(f *testing.F) {
	rc := newReceiver(f, accept)
	s := build(f, map[string]any{"url": rc.URL, "secrets": []any{secretA, secretB}, "allow_private": true})
	f.Fuzz(func(t *testing.T, payload []byte, key string) {
		rc.take() // nothing should be there; the checks below see only this input's requests
		err := s.Deliver(t.Context(), &sink.Delivery{ID: 1, Sink: "hook", DedupKey: key, Payload: json.RawMessage(payload), Attempt: 1})
		reqs := rc.take()
		if err != nil {
			if !sink.IsPermanent(err) || len(reqs) != 0 {
				t.Fatalf("key %q: %v after %d requests, want delivery or a permanent refusal before sending", key, err, len(reqs))
			}
			if id := "hook/" + key; strings.TrimSpace(id) == id && !strings.ContainsFunc(id, isControl) {
				t.Fatalf("key %q could have been sent: %v", key, err)
			}
			return
		}
		if len(reqs) != 1 {
			t.Fatalf("%d requests for one delivery", len(reqs))
		}
		r := reqs[0]
		if !bytes.Equal(r.body, payload) {
			t.Fatalf("body %q, want %q", r.body, payload)
		}
		if got, want := r.header.Get("webhook-id"), "hook/"+key; got != want {
			t.Fatalf("webhook-id %q, want %q", got, want)
		}
		for _, secret := range []string{secretA, secretB} {
			if err := verify(secret, r.header, r.body, time.Now()); err != nil {
				t.Fatalf("key %q: %v", key, err)
			}
		}
	})
}

// isControl reports the characters an HTTP header value cannot carry.
func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }
