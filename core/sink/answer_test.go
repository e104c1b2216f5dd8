package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outboxd/outboxd/core/sink"
)

// An answer's body is kept up to MaxAnswerBytes, never splitting a
// character: a character straddling the bound is left out whole.
// (Mutation: AnswerBody cutting at exactly MaxAnswerBytes keeps the
// character's first byte, and the result is not valid UTF-8.)
func TestAnswerBodyCutsAtACharacter(t *testing.T) {
	t.Parallel()
	for _, before := range []int{sink.MaxAnswerBytes - 1, sink.MaxAnswerBytes - 2, sink.MaxAnswerBytes - 3} {
		body := strings.Repeat("x", before) + "€€"
		got := sink.AnswerBody([]byte(body))
		if !utf8.ValidString(got) || len(got) > sink.MaxAnswerBytes || !strings.HasPrefix(body, got) || len(got) < sink.MaxAnswerBytes-utf8.UTFMax {
			t.Errorf("%d bytes before a 3-byte character: kept %d bytes, valid UTF-8 %t", before, len(got), utf8.ValidString(got))
		}
	}
	if got := sink.AnswerBody([]byte("short")); got != "short" {
		t.Errorf("a short answer kept as %q", got)
	}
}

// RecordAnswer without a slot (a sink called outside the relay) does
// nothing; with one, the last answer recorded counts.
func TestRecordAnswerFillsTheRelaysSlot(t *testing.T) {
	t.Parallel()
	sink.RecordAnswer(context.Background(), sink.Answer{Status: 200}) // no slot: no panic, nothing kept
	var got sink.Answer
	ctx := sink.WithAnswerSlot(context.Background(), &got)
	sink.RecordAnswer(ctx, sink.Answer{Status: 401})
	sink.RecordAnswer(ctx, sink.Answer{Status: 200, Body: "ok", RemoteAddr: "203.0.113.7:443"})
	if got != (sink.Answer{Status: 200, Body: "ok", RemoteAddr: "203.0.113.7:443"}) {
		t.Errorf("the slot holds %+v, want the last answer", got)
	}
}

// A sink that speaks HTTP records each attempt's answer with the context
// Deliver was given; the relay stores it with the attempt, beside the
// attempt's start and duration.
func ExampleRecordAnswer() {
	deliver := sink.Func(func(ctx context.Context, d *sink.Delivery) error {
		// ... the request, then its answer:
		status, body, remote := 503, []byte(`{"error": "maintenance"}`), "203.0.113.7:443"
		sink.RecordAnswer(ctx, sink.Answer{Status: status, Body: sink.AnswerBody(body), RemoteAddr: remote})
		return sink.HTTPStatus(status, nil)
	})

	// What the relay does around a delivery:
	var answer sink.Answer
	ctx := sink.WithAnswerSlot(context.Background(), &answer)
	err := deliver.Deliver(ctx, &sink.Delivery{ID: 1, Sink: "hooks", DedupKey: "k"})
	fmt.Println(err, answer.Status, answer.Body)
	// Output: HTTP 503 503 {"error": "maintenance"}
}
