package sinktest

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// callTimeout bounds every call the checks make of a sink but the
// deadline check's: long enough for a real broker on a loaded machine.
const callTimeout = 30 * time.Second

// The sizes of the batch and digest checks and which of their items are
// spoiled: some, not the first nor the last.
const (
	batchSize   = 6
	digestSize  = 4
	spoiledStep = 3 // items 1, 4, ... are spoiled
)

// The check functions below are not test helpers: a failure is reported
// at the line of the check that found it, the one place that says what
// was checked (a subtest's stack does not reach the sink's own test).

// outcome is the class of a delivery's error, as the relay reads it.
type outcome string

const (
	delivered  outcome = "delivered (nil)"
	retryable  outcome = "retryable"
	permanent  outcome = "permanent (sink.Permanent)"
	retryAfter outcome = "retry after (sink.RetryAfter)"
)

// classify reads err as the relay does: a Retry-After before a
// permanent failure.
func classify(err error) outcome {
	if err == nil {
		return delivered
	}
	if _, ok := sink.RetryAfterDelay(err); ok {
		return retryAfter
	}
	if sink.IsPermanent(err) {
		return permanent
	}
	return retryable
}

// build returns a sink from New.
func (h *harness) build(t testing.TB) sink.Sink {
	t.Helper()
	s := h.New(t)
	if s == nil {
		t.Fatalf("sinktest: Harness.New returned a nil sink")
	}
	return s
}

// newSink returns a sink from New, closed when t's check ends.
func (h *harness) newSink(t testing.TB) sink.Sink {
	t.Helper()
	s := h.build(t)
	closeAtEnd(t, s)
	return s
}

// closeAtEnd closes s, if it is an io.Closer, when t's check ends.
func closeAtEnd(t testing.TB, s sink.Sink) {
	t.Cleanup(func() { closeQuietly(s) })
}

// closeQuietly closes s if it is an io.Closer. A Close that fails or
// panics here is the close check's business.
func closeQuietly(s sink.Sink) {
	if c, ok := s.(io.Closer); ok {
		_, _ = closeSafely(c)
	}
}

// closeSafely calls c.Close and reports a panic instead of raising it.
func closeSafely(c io.Closer) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, c.Close()
}

// deliver sends d through s within callTimeout, with d's context the
// call's, as the relay does.
func deliver(s sink.Sink, d *sink.Delivery) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return s.Deliver(ctx, d.WithContext(ctx))
}

// received returns the ids New's destination has received, or nil when
// the harness cannot tell.
func (h *harness) received(t testing.TB) []string {
	if h.Received == nil {
		return nil
	}
	return h.Received(t)
}

// arrivals returns the ids in after that were not in before, counting
// repeats: what arrived in between.
func arrivals(before, after []string) []string {
	seen := map[string]int{}
	for _, id := range before {
		seen[id]++
	}
	var out []string
	for _, id := range after {
		if seen[id] > 0 {
			seen[id]--
			continue
		}
		out = append(out, id)
	}
	return out
}

func checkAccepted(t testing.TB, h *harness) {
	if err := deliver(h.newSink(t), h.delivery("accepted")); err != nil {
		t.Errorf("Deliver to a destination that accepts: %v, want nil", err)
	}
}

func checkRetryable(t testing.TB, h *harness) {
	h.checkAnswer(t, "retryable", "Retryable", h.Retryable, retryable)
}

func checkPermanent(t testing.TB, h *harness) {
	h.checkAnswer(t, "permanent", "Permanent", h.Permanent, permanent)
}

func checkRetryAfter(t testing.TB, h *harness) {
	h.checkAnswer(t, "retry-after", "RetryAfter", h.RetryAfter, retryAfter)
}

// checkAnswer delivers once to the destination that arrange (the
// harness's hook called hook) sets up and requires an error of class
// want.
func (h *harness) checkAnswer(t testing.TB, name, hook string, arrange func(testing.TB) Case, want outcome) {
	t.Helper()
	if arrange == nil {
		skip(t, "the "+name+" answer", "Harness."+hook+" is nil")
		return
	}
	s, d, c := h.arrange(t, name, arrange)
	err := deliver(s, d)
	if got := classify(err); got != want {
		t.Errorf("Deliver to a destination that answers %s: %v, classified %s, want %s", name, err, got, want)
		return
	}
	if want != retryAfter {
		return
	}
	if delay, _ := sink.RetryAfterDelay(err); delay != c.Delay {
		t.Errorf("Deliver to a destination that asks for a wait of %s: %v, a wait of %s", c.Delay, err, delay)
	}
}

// arrange sets up the destination of a check with the hook given and
// returns the sink to deliver through and the delivery to send.
func (h *harness) arrange(t testing.TB, check string, arrange func(testing.TB) Case) (sink.Sink, *sink.Delivery, Case) {
	t.Helper()
	// The sink is closed after what the hook registers is undone: one
	// whose destination hangs may take long to close until the
	// destination is gone.
	var s sink.Sink
	t.Cleanup(func() { closeQuietly(s) })
	c := arrange(t)
	if s = c.Sink; s == nil {
		s = h.build(t)
	}
	d := h.delivery(check)
	if c.Alter != nil {
		c.Alter(d)
	}
	return s, d, c
}

// checkDeadline delivers to a destination that never answers, with a
// context that ends after Deadline: Deliver must return within Grace of
// it with a retryable error (the message is not at fault).
func checkDeadline(t testing.TB, h *harness) {
	if h.Hang == nil {
		skip(t, "the deadline", "Harness.Hang is nil")
		return
	}
	s, d, _ := h.arrange(t, "deadline", h.Hang)
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Deliver(ctx, d.WithContext(ctx)) }()
	select {
	case err := <-done:
		took := time.Since(start)
		// Judged against the deadline itself, not took: start is read
		// after the deadline was set, so a call that ran to the deadline
		// can measure a little under Deadline (249.55 ms of 250 under
		// -race in CI). Nor by ctx.Err(): a sink that sets its connection's
		// deadline from the context's returns at that time, a moment
		// before the context reports it ended.
		if deadline, _ := ctx.Deadline(); time.Now().Before(deadline) {
			t.Errorf("Deliver to a destination that hangs returned after %s, before its context's deadline of %s (%v): the destination did not hang", took, Deadline, err)
			return
		}
		if got := classify(err); got != retryable {
			t.Errorf("Deliver whose context ended: %v, classified %s, want %s", err, got, retryable)
		}
	case <-time.After(Deadline + Grace):
		// The call is left running; the sink is closed when the check ends.
		t.Errorf("Deliver to a destination that hangs has not returned %s after its context ended", Grace)
	}
}

// checkClose closes a sink that is an io.Closer twice, unused and after
// a delivery: the first Close must succeed, the second must not panic.
func checkClose(t testing.TB, h *harness) {
	unused := h.New(t)
	c, ok := unused.(io.Closer)
	if !ok {
		skip(t, "Close", "the sink is not an io.Closer")
		return
	}
	closeTwice(t, "an unused sink", c)
	used := h.New(t)
	if err := deliver(used, h.delivery("close")); err != nil {
		closeAtEnd(t, used)
		t.Fatalf("Deliver before Close: %v, want nil", err)
	}
	closeTwice(t, "a sink after a delivery", used.(io.Closer))
}

// closeTwice closes c, which must succeed, and closes it again, which
// must not panic.
func closeTwice(t testing.TB, what string, c io.Closer) {
	t.Helper()
	if p, err := closeSafely(c); p != nil {
		t.Errorf("Close of %s panicked: %v", what, p)
	} else if err != nil {
		t.Errorf("Close of %s: %v, want nil", what, err)
	}
	if p, err := closeSafely(c); p != nil {
		t.Errorf("a second Close of %s panicked: %v", what, p)
	} else if err != nil {
		t.Logf("sinktest: a second Close of %s answered %v", what, err)
	}
}

// checkDeliveryIDs sends a delivery, sends it again as a later attempt,
// then sends another: the first two reach the destination under one id
// (or the destination keeps one copy), the third under another.
func checkDeliveryIDs(t testing.TB, h *harness) {
	if h.Received == nil {
		skip(t, "delivery ids", "Harness.Received is nil")
		return
	}
	s := h.newSink(t)
	first := h.delivery("ids")
	retry := *first
	retry.Attempt++
	second := h.delivery("ids")

	firstIDs := h.sendAndWatch(t, s, first, "a delivery")
	if len(firstIDs) != 1 {
		t.Fatalf("one delivery reached the destination under %d ids %q, want 1", len(firstIDs), firstIDs)
	}
	switch again := h.sendAndWatch(t, s, &retry, "the same delivery again"); {
	case len(again) == 0:
		t.Logf("sinktest: the destination kept one copy of a delivery sent twice")
	case len(again) > 1 || again[0] != firstIDs[0]:
		t.Errorf("the same delivery sent again reached the destination under %q, want %q as the first time", again, firstIDs[0])
	}
	secondIDs := h.sendAndWatch(t, s, second, "another delivery")
	if len(secondIDs) != 1 || secondIDs[0] == firstIDs[0] {
		t.Errorf("another delivery reached the destination under %q, want one id other than the first's %q", secondIDs, firstIDs[0])
	}
}

// sendAndWatch delivers d, which must succeed, and returns the ids that
// reached the destination meanwhile.
func (h *harness) sendAndWatch(t testing.TB, s sink.Sink, d *sink.Delivery, what string) []string {
	t.Helper()
	before := h.received(t)
	if err := deliver(s, d); err != nil {
		t.Fatalf("Deliver of %s (attempt %d): %v, want nil", what, d.Attempt, err)
	}
	return arrivals(before, h.received(t))
}

// spoiled reports whether the checks spoil item i of a batch or digest.
func spoiled(i int) bool { return i%spoiledStep == 1 }

// checkBatch hands a BatchSink a batch with spoiled items: each gets an
// error, classified as Deliver classifies the same spoiled delivery, and
// no receipt; the others succeed and reach the destination.
func checkBatch(t testing.TB, h *harness) {
	s := h.newSink(t)
	bs, ok := s.(sink.BatchSink)
	switch {
	case !ok:
		skip(t, "DeliverBatch", "the sink is not a sink.BatchSink")
		return
	case h.Spoil == nil:
		skip(t, "DeliverBatch", "Harness.Spoil is nil")
		return
	}
	alone := h.delivery("batch")
	h.Spoil(alone)
	want := classify(deliver(s, alone))
	if want == delivered {
		t.Fatalf("Deliver of a spoiled delivery succeeded: Harness.Spoil does not spoil it")
	}

	ds := make([]*sink.Delivery, batchSize)
	for i := range ds {
		ds[i] = h.delivery("batch")
		if spoiled(i) {
			h.Spoil(ds[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	for i, d := range ds {
		ds[i] = d.WithContext(ctx)
	}
	before := h.received(t)
	errs := bs.DeliverBatch(ctx, ds)
	if len(errs) != len(ds) {
		t.Fatalf("DeliverBatch of %d deliveries returned %d outcomes", len(ds), len(errs))
	}
	good := 0
	for i, err := range errs {
		switch got := classify(err); {
		case !spoiled(i) && got != delivered:
			t.Errorf("DeliverBatch, item %d (not spoiled): %v, want nil", i, err)
		case !spoiled(i):
			good++
		case got != want:
			t.Errorf("DeliverBatch, item %d (spoiled): %v, classified %s, want %s as Deliver classifies it", i, err, got, want)
		case ds[i].Receipt() != nil:
			t.Errorf("DeliverBatch, item %d (spoiled, failed): has the receipt %s", i, ds[i].Receipt())
		}
	}
	if h.Received != nil {
		if got := arrivals(before, h.received(t)); len(got) != good {
			t.Errorf("DeliverBatch delivered %d items, the destination received %d: %q", good, len(got), got)
		}
	}
}

// checkDigest hands a DigestSink a digest with spoiled members, which it
// must refuse (those only, sending nothing), then the digest without
// them, which it must deliver as one.
func checkDigest(t testing.TB, h *harness) {
	s := h.newSink(t)
	ds, ok := s.(sink.DigestSink)
	if !ok {
		skip(t, "DeliverDigest", "the sink is not a sink.DigestSink")
		return
	}
	dg := &sink.Digest{Sink: SinkName, Key: "sinktest"}
	var good []*sink.Delivery
	var spoilt []int
	for i := range digestSize {
		d := h.delivery("digest")
		if h.Spoil != nil && spoiled(i) {
			h.Spoil(d)
			spoilt = append(spoilt, i)
		} else {
			good = append(good, d)
		}
		dg.Members = append(dg.Members, d)
	}
	dg.ID = h.sent // one of its own, as a digest's id is
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	before := h.received(t)
	if h.Spoil == nil {
		skip(t, "DeliverDigest's refused members", "Harness.Spoil is nil")
	} else {
		err := ds.DeliverDigest(ctx, dg)
		refused, ok := sink.RefusedMembers(err)
		if got := slices.Sorted(maps.Keys(refused)); !ok || !slices.Equal(got, spoilt) {
			t.Fatalf("DeliverDigest with members %v spoiled: %v, refusing %v, want sink.RefuseMembers of exactly those", spoilt, err, got)
		}
		if h.Received != nil {
			if got := arrivals(before, h.received(t)); len(got) != 0 {
				t.Errorf("DeliverDigest refused members but sent %q", got)
			}
		}
		dg.Members = good
	}
	if err := ds.DeliverDigest(ctx, dg); err != nil {
		t.Fatalf("DeliverDigest of %d members: %v, want nil", len(dg.Members), err)
	}
	if h.Received != nil {
		if got := arrivals(before, h.received(t)); len(got) != 1 {
			t.Errorf("one digest reached the destination under %d ids %q, want 1", len(got), got)
		}
	}
}

// checkChecker holds New's sink to the contract of sink.Checker, as
// CheckChecker does, against Unreachable's when the harness has one. A
// sink that cannot check without sending (sink.ErrCannotCheck) passes, as
// the contract allows.
func checkChecker(t testing.TB, h *harness) {
	live := h.newSink(t)
	if _, ok := live.(sink.Checker); !ok {
		skip(t, "Check", "the sink is not a sink.Checker")
		return
	}
	var away sink.Sink
	if h.Unreachable != nil {
		away = h.Unreachable(t)
		closeAtEnd(t, away)
	} else {
		skip(t, "Check against a destination that is not there", "Harness.Unreachable is nil")
	}
	var delivered func() int
	if h.Received != nil {
		delivered = func() int { return len(h.received(t)) }
	}
	holdChecker(t, live, away, delivered, true)
}

// CheckChecker holds a sink.Checker to its contract: live's Check, against
// a destination that is there, succeeds and delivers nothing (delivered
// counts what reached the destination; nil when the test cannot tell);
// away's, against a destination that is not there (an address nothing
// listens on, credentials it refuses), fails; a nil away is not checked.
// It is for a sink that can check: a live Check answering
// sink.ErrCannotCheck fails it (Run's checker check lets it pass).
func CheckChecker(t testing.TB, live, away sink.Sink, delivered func() int) {
	t.Helper()
	holdChecker(t, live, away, delivered, false)
}

// holdChecker is CheckChecker, passing a live sink whose Check answers
// sink.ErrCannotCheck when cannotCheck allows it.
func holdChecker(t testing.TB, live, away sink.Sink, delivered func() int, cannotCheck bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	before := 0
	if delivered != nil {
		before = delivered()
	}
	err := live.(sink.Checker).Check(ctx)
	switch {
	case cannotCheck && errors.Is(err, sink.ErrCannotCheck):
		t.Logf("sinktest: the sink cannot be checked without sending a message")
		return
	case err != nil:
		t.Fatalf("Check against a destination that is there: %v", err)
	}
	if delivered != nil {
		if n := delivered() - before; n != 0 {
			t.Errorf("Check delivered %d messages", n)
		}
	}
	if away != nil {
		if err := away.(sink.Checker).Check(ctx); err == nil {
			t.Error("Check against a destination that is not there succeeded")
		}
	}
}
