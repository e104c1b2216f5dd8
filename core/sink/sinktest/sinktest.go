// Package sinktest holds a sink to the contract of package sink, as the
// relay relies on it: a sink's own test says how to build the sink and how
// to make its destination (a fake, or the real thing) answer, and calls
// [Run] once.
//
//	func TestContract(t *testing.T) {
//		receiver := newFakeReceiver(t) // the sink's own fake destination
//		sinktest.Run(t, sinktest.Harness{
//			New:      func(t testing.TB) sink.Sink { return mysink.New(receiver.URL) },
//			Received: func(t testing.TB) []string { return receiver.IDs() },
//			Retryable: func(t testing.TB) sinktest.Case {
//				return sinktest.Case{Sink: mysink.New(newFakeReceiverAnswering(t, 503).URL)}
//			},
//			// ... Permanent, RetryAfter, Hang, Spoil, Unreachable
//		})
//	}
//
// Run's checks (each a subtest when Run is given a *testing.T):
//
//   - accepted, retryable, permanent, retry-after: for each answer of the
//     destination, Deliver's error is what the contract says: nil when it
//     accepts; neither [sink.Permanent] nor [sink.RetryAfter] when it
//     fails for now; [sink.Permanent] when it refuses for good;
//     [sink.RetryAfter] with the wait it asked for when it says "later".
//   - deadline: Deliver returns within [Grace] of its context's end while
//     the destination hangs, with a retryable error.
//   - close: a sink that is an io.Closer closes, unused and after a
//     delivery, and a second Close does not panic.
//   - delivery-ids: the same delivery sent twice reaches the destination
//     under one id, and two deliveries under two ids.
//   - batch: a [sink.BatchSink] reports an error for exactly the spoiled
//     items of a batch, classified as Deliver classifies them.
//   - digest: a [sink.DigestSink] refuses exactly the spoiled members of a
//     digest ([sink.RefuseMembers]) without sending it, and delivers the
//     others as one delivery.
//   - checker: a [sink.Checker]'s Check succeeds without delivering and
//     fails when the destination is not there ([CheckChecker]).
//
// A check the sink cannot support is skipped, with a line in the test's
// log, when its hook in [Harness] is nil or the sink does not implement
// the optional interface it checks: a destination that cannot be made to
// answer with a Retry-After is no fault of the sink.
//
// The package imports only package sink, the standard library and
// testing, so a sink's test links nothing else of outboxd.
package sinktest

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// SinkName is the sink name (sink.Delivery.Sink) of the deliveries the
// checks send: build the sink under test with it.
const SinkName = "sinktest"

// The bounds of the deadline check.
const (
	// Deadline is how long the deadline check gives Deliver, through its
	// context, against a destination that never answers.
	Deadline = 250 * time.Millisecond
	// Grace is how soon after its context ended Deliver must return: the
	// relay's delivery deadline sits inside the row's lease, and a
	// delivery that outlives the lease may be repeated by another relay.
	Grace = 2 * time.Second
)

// Harness is a sink under test and the destination it delivers to, as the
// sink's own test builds and controls them. Only New is required; every
// other hook left nil skips the checks that need it.
//
// Each hook gets the test of the check that calls it (a subtest of Run's
// when Run is given a *testing.T): what it registers with t.Cleanup is
// undone when that check ends, so a hook may switch a destination the
// checks share to another answer and switch it back with t.Cleanup.
type Harness struct {
	// New builds a new sink under test, named SinkName, delivering to a
	// destination that accepts every delivery. Each call must build a
	// new sink: the close check closes the ones it gets. Run closes every
	// sink it is given when the check that got it ends.
	New func(t testing.TB) sink.Sink

	// Prepare completes each delivery the checks make before it is sent,
	// with what the sink needs in every delivery (payload fields,
	// headers). The checks' deliveries carry the payload
	// {"text": "sinktest <n>"} and an empty Headers map; nil leaves them
	// so.
	Prepare func(d *sink.Delivery)

	// Received returns the delivery ids that New's destination has
	// received so far, in any order, each as the receiver saw it (a
	// header, a message id): the id a receiver de-duplicates on. A
	// delivery whose Deliver returned nil must be among them. nil skips
	// the delivery-id check and the counts of the other checks.
	Received func(t testing.TB) []string

	// Retryable, Permanent and RetryAfter arrange a destination that
	// answers every delivery that way (a 503, a 400, a 429 with
	// Retry-After; a broker's "not now" or "never"), and Hang one that
	// never answers. nil skips the check of that answer.
	Retryable  func(t testing.TB) Case
	Permanent  func(t testing.TB) Case
	RetryAfter func(t testing.TB) Case
	Hang       func(t testing.TB) Case

	// Spoil makes d a delivery the sink cannot deliver whatever its
	// destination answers (a payload it cannot send), while New's sink
	// delivers the others: a BatchSink must report an error for exactly
	// the spoiled items of a batch, a DigestSink must refuse exactly the
	// spoiled members of a digest. nil skips the refusals; a DigestSink
	// that takes or refuses a digest whole leaves it nil.
	Spoil func(d *sink.Delivery)

	// Unreachable builds a sink, like New's, whose destination is not
	// there (an address nothing listens on): a sink.Checker's Check must
	// fail for it. nil checks Check against New's destination only.
	Unreachable func(t testing.TB) sink.Sink
}

// Case is how a check reaches a destination arranged to give one answer.
type Case struct {
	// Sink delivers to the arranged destination; nil takes a new sink
	// from Harness.New (for a destination whose answer the hook
	// switched).
	Sink sink.Sink
	// Alter changes the check's delivery before it is sent, when that is
	// what leads to the answer (a header naming the arranged
	// destination); nil sends it as made.
	Alter func(d *sink.Delivery)
	// Delay is, for Harness.RetryAfter, the wait the destination asks
	// for: sink.RetryAfterDelay must report it.
	Delay time.Duration
}

// check is one of Run's checks.
type check struct {
	name string
	run  func(t testing.TB, h *harness)
}

// checks are Run's checks, in the order they run.
var checks = []check{
	{"accepted", checkAccepted},
	{"retryable", checkRetryable},
	{"permanent", checkPermanent},
	{"retry-after", checkRetryAfter},
	{"deadline", checkDeadline},
	{"close", checkClose},
	{"delivery-ids", checkDeliveryIDs},
	{"batch", checkBatch},
	{"digest", checkDigest},
	{"checker", checkChecker},
}

// Run holds the sink that h builds to the contract of package sink; see
// the package documentation for its checks. Given a *testing.T it runs
// each check as a subtest; given another testing.TB, each in turn, in a
// goroutine of its own (so that a FailNow ends the check only), with
// cleanups left to t.
func Run(t testing.TB, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatalf("sinktest: Harness.New is required")
	}
	hs := &harness{Harness: h, run: rand.Text()[:8]}
	for _, c := range checks {
		if tt, ok := t.(*testing.T); ok {
			tt.Run(c.name, func(t *testing.T) { c.run(t, hs) })
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.run(t, hs)
		}()
		<-done
	}
}

// harness is a Harness with what one Run needs besides.
type harness struct {
	Harness
	run  string // in every dedup key, so a destination that outlives the test never holds one of ours
	sent int64  // deliveries made so far, numbering them
}

// skip says in t's log what a check leaves out, and why.
func skip(t testing.TB, what, why string) {
	t.Helper()
	t.Logf("sinktest: skipped %s: %s", what, why)
}

// delivery returns a new first attempt for the check named, completed by
// Prepare.
func (h *harness) delivery(check string) *sink.Delivery {
	h.sent++
	d := &sink.Delivery{
		ID: h.sent, Sink: SinkName, DedupKey: fmt.Sprintf("%s-%s-%d", check, h.run, h.sent),
		Payload: fmt.Appendf(nil, `{"text":"sinktest %d"}`, h.sent), Headers: map[string]string{},
		Attempt: 1, MaxAttempts: maxAttempts, CreatedAt: time.Now(),
	}
	if h.Prepare != nil {
		h.Prepare(d)
	}
	return d
}

// maxAttempts is the MaxAttempts of the checks' deliveries: more than the
// retry they make of one.
const maxAttempts = 3
