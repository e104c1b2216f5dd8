package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// A webhook sink that digests sends each digest in one signed call whose
// body is a JSON list of the members' payloads, in enqueue order, under
// webhook-id "<sink>/digest-<id>". A digest the receiver fails is sent
// again as the same digest: the same webhook-id and the same list, so the
// receiver can tell the repeat; every row is delivered once, in one
// accepted call. (Mutation: recording a new digest on the retry instead
// of regrouping by digest_id, claim_digest_members.sql's work, sends its
// rows twice under two webhook-ids.)
func TestDigestIsOneSignedCallRetriedAsTheSameDigest(t *testing.T) {
	t.Parallel()
	const rows, most = 30, 10
	pool, ob := testdb.New(t)
	var calls atomic.Int64
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError) // the first digest fails once
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	msgs := make([]outboxd.Message, rows)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: "hook", DedupKey: fmt.Sprintf("order-%02d", i), Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: build(t, map[string]any{"url": rc.URL, "secret": secretA, "allow_private": true}),
			Digest: &sink.DigestPolicy{MaxMessages: most}, Backoff: relay.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}}},
		PollInterval: 50 * time.Millisecond,
	})
	signals.WaitWritten(t, relayDeadline, "hook", "sent", rows)

	reqs := rc.take()
	if len(reqs) != rows/most+1 {
		t.Fatalf("%d calls, want %d digests and one repeat", len(reqs), rows/most)
	}
	bodies := map[string]string{} // by webhook-id
	seen := map[int]int{}
	for i, r := range reqs {
		id := r.header.Get("webhook-id")
		if err := verify(secretA, r.header, r.body, time.Now()); err != nil {
			t.Errorf("call %d (%s): %v", i, id, err)
		}
		if !strings.HasPrefix(id, "hook/digest-") {
			t.Errorf("call %d: webhook-id %q, want hook/digest-<id>", i, id)
		}
		if prev, repeat := bodies[id]; repeat {
			if prev != string(r.body) {
				t.Errorf("the repeat of %s carries %s, want the same members %s", id, r.body, prev)
			}
			continue
		}
		bodies[id] = string(r.body)
		var list []struct{ N int }
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatalf("call %d: body %s is not a JSON list: %v", i, r.body, err)
		}
		for j, m := range list {
			if j > 0 && m.N < list[j-1].N {
				t.Errorf("%s: member %d after %d, want enqueue order", id, m.N, list[j-1].N)
			}
			seen[m.N]++
		}
	}
	if len(bodies) != rows/most {
		t.Errorf("%d distinct webhook-ids, want %d: the failed digest must be repeated under its own", len(bodies), rows/most)
	}
	for i := range rows {
		if seen[i] != 1 {
			t.Errorf("row %d is in %d digests, want 1", i, seen[i])
		}
	}
}
