package sinktest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
)

// The answers a memDest can be told to give.
const (
	accepts     = "accepts"
	unavailable = "unavailable" // retryable
	refuses     = "refuses"     // permanent
	busy        = "busy"        // Retry-After
	hangs       = "hangs"
	away        = "away" // not there: Check fails
)

// busyFor is the wait a busy memDest asks for.
const busyFor = 7 * time.Second

// spoiledPayload is the payload no memSink can deliver.
const spoiledPayload = `{"spoiled":true}`

// memDest is an in-memory destination: it answers every delivery as
// told and records the ids of those it accepts.
type memDest struct {
	answer string

	mu  sync.Mutex
	ids []string
}

func (m *memDest) take(ctx context.Context, id string) error {
	switch m.answer {
	case unavailable:
		return errors.New("503 Service Unavailable")
	case refuses:
		return sink.Permanent(errors.New("400 Bad Request"))
	case busy:
		return sink.RetryAfter(busyFor, errors.New("429 Too Many Requests"))
	case hangs:
		<-ctx.Done()
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids = append(m.ids, id)
	return nil
}

func (m *memDest) received(testing.TB) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}

// memSink delivers to a memDest, keeping the contract unless bug names
// a way to break it; it implements every optional interface the kit
// checks.
type memSink struct {
	dest *memDest
	bug  string

	closes int
	// stuck is closed when the test ends: a sink that ignores its
	// context waits for it.
	stuck chan struct{}
}

// The ways a memSink can break the contract.
const (
	ignoresContext     = "ignores its context"
	permanentTimeouts  = "calls a deadline permanent"
	everyErrorRetries  = "never says permanent"
	secondClosePanics  = "panics on a second Close"
	closeFails         = "fails to Close"
	idPerAttempt       = "sends each attempt under an id of its own"
	oneIDForAll        = "sends every delivery under one id"
	batchFailsWhole    = "fails a whole batch for one bad item"
	batchShifts        = "reports a batch's outcomes one item off"
	digestFailsWhole   = "fails a whole digest for one bad member"
	checkDelivers      = "delivers a message to check"
	checkLooksNowhere  = "checks nothing"
	wrongRetryAfter    = "asks for a wait of its own"
	batchReceiptOnFail = "sets a receipt on a failed item"
)

func (s *memSink) id(d *sink.Delivery) string {
	switch s.bug {
	case idPerAttempt:
		return fmt.Sprintf("%s#%d", d.DeliveryID(), d.Attempt)
	case oneIDForAll:
		return d.Sink
	}
	return d.DeliveryID()
}

func (s *memSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	if bytes.Equal(d.Payload, []byte(spoiledPayload)) {
		return sink.Permanent(errors.New("the payload cannot be sent"))
	}
	err := s.dest.take(s.context(ctx), s.id(d))
	switch {
	case err == nil:
		return d.SetReceipt(map[string]string{"id": s.id(d)})
	case s.bug == permanentTimeouts && ctx.Err() != nil:
		return sink.Permanent(err)
	case s.bug == everyErrorRetries && s.dest.answer == refuses:
		return errors.New(strings.TrimPrefix(err.Error(), "permanent: "))
	case s.bug == wrongRetryAfter && s.dest.answer == busy:
		return sink.RetryAfter(time.Second, err)
	}
	return err
}

// context is ctx, or, for a sink that ignores it, one that ends with the
// test.
func (s *memSink) context(ctx context.Context) context.Context {
	if s.bug != ignoresContext {
		return ctx
	}
	stuck, cancel := context.WithCancel(context.Background())
	go func() { <-s.stuck; cancel() }()
	return stuck
}

func (s *memSink) DeliverBatch(ctx context.Context, ds []*sink.Delivery) []error {
	errs := make([]error, len(ds))
	for i, d := range ds {
		errs[i] = s.Deliver(ctx, d)
	}
	switch s.bug {
	case batchFailsWhole:
		for _, err := range errs {
			if err != nil {
				return slices.Repeat([]error{err}, len(ds))
			}
		}
	case batchShifts:
		return append(errs[1:], errs[0])
	case batchReceiptOnFail:
		for i, err := range errs {
			if err != nil {
				_ = ds[i].SetReceipt("none")
			}
		}
	}
	return errs
}

func (s *memSink) DeliverDigest(ctx context.Context, dg *sink.Digest) error {
	refused := map[int]error{}
	for i, d := range dg.Members {
		if bytes.Equal(d.Payload, []byte(spoiledPayload)) {
			refused[i] = errors.New("the payload cannot be sent")
		}
	}
	switch {
	case len(refused) > 0 && s.bug == digestFailsWhole:
		return sink.Permanent(errors.New("a member cannot be sent"))
	case len(refused) > 0:
		return sink.RefuseMembers(refused)
	}
	return s.dest.take(ctx, dg.DeliveryID())
}

func (s *memSink) Check(ctx context.Context) error {
	switch {
	case s.bug == checkDelivers:
		return s.dest.take(ctx, "check")
	case s.bug == checkLooksNowhere:
		return nil
	case s.dest.answer == away:
		return errors.New("connection refused")
	}
	return nil
}

func (s *memSink) Close() error {
	s.closes++
	switch {
	case s.bug == closeFails:
		return errors.New("close failed")
	case s.bug == secondClosePanics && s.closes > 1:
		panic("closed twice")
	}
	return nil
}

// memHarness is a harness over memDests whose sinks have bug ("" for
// none).
func memHarness(t *testing.T, bug string) sinktest.Harness {
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	accepting := &memDest{answer: accepts}
	build := func(d *memDest) sink.Sink { return &memSink{dest: d, bug: bug, stuck: stuck} }
	answering := func(answer string) func(testing.TB) sinktest.Case {
		return func(testing.TB) sinktest.Case { return sinktest.Case{Sink: build(&memDest{answer: answer})} }
	}
	return sinktest.Harness{
		New:       func(testing.TB) sink.Sink { return build(accepting) },
		Received:  accepting.received,
		Retryable: answering(unavailable),
		Permanent: answering(refuses),
		RetryAfter: func(testing.TB) sinktest.Case {
			return sinktest.Case{Sink: build(&memDest{answer: busy}), Delay: busyFor}
		},
		Hang:  answering(hangs),
		Spoil: func(d *sink.Delivery) { d.Payload = []byte(spoiledPayload) },
		Unreachable: func(testing.TB) sink.Sink {
			return build(&memDest{answer: away})
		},
	}
}

// A sink that keeps the contract passes every check, each a subtest.
func TestRunPassesASinkKeepingTheContract(t *testing.T) {
	sinktest.Run(t, memHarness(t, ""))
}

// A sink that keeps the contract passes on any testing.TB, with every
// check run (nothing skipped).
func TestRunOnAnyTestingTB(t *testing.T) {
	rec := &recorder{}
	sinktest.Run(rec, memHarness(t, ""))
	if lines := rec.finish(); len(lines) != 0 {
		t.Errorf("the kit reported %q, want nothing", lines)
	}
}

// Each way of breaking the contract fails the check that covers it, with
// a message that says what is wrong. (Each case is the mutation that
// shows its check works.)
func TestRunFindsEachBreachOfTheContract(t *testing.T) {
	for _, c := range []struct{ bug, want string }{
		{ignoresContext, "has not returned 2s after its context ended"},
		{permanentTimeouts, "Deliver whose context ended"},
		{everyErrorRetries, "answers permanent"},
		{wrongRetryAfter, "asks for a wait of 7s"},
		{secondClosePanics, "a second Close of an unused sink panicked: closed twice"},
		{closeFails, "Close of an unused sink: close failed, want nil"},
		{idPerAttempt, "the same delivery sent again reached the destination under"},
		{oneIDForAll, "another delivery reached the destination under"},
		{batchFailsWhole, "item 0 (not spoiled)"},
		{batchShifts, "item 0 (not spoiled)"},
		{batchReceiptOnFail, "(spoiled, failed): has the receipt"},
		{digestFailsWhole, "want sink.RefuseMembers of exactly those"},
		{checkDelivers, "Check delivered 1 messages"},
		{checkLooksNowhere, "Check against a destination that is not there succeeded"},
	} {
		t.Run(c.bug, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			sinktest.Run(rec, memHarness(t, c.bug))
			failures := rec.failures()
			if !slices.ContainsFunc(failures, func(f string) bool { return strings.Contains(f, c.want) }) {
				t.Errorf("a sink that %s: the kit reported %q, want a failure containing %q", c.bug, failures, c.want)
			}
		})
	}
}

// A harness that can do nothing but build the sink runs the checks it
// can and says in the log which it skipped, failing none.
func TestRunSkipsWhatTheHarnessCannotArrange(t *testing.T) {
	rec := &recorder{}
	sinktest.Run(rec, sinktest.Harness{New: func(testing.TB) sink.Sink {
		return sink.Func(func(context.Context, *sink.Delivery) error { return nil })
	}})
	want := []string{
		"sinktest: skipped the retryable answer: Harness.Retryable is nil",
		"sinktest: skipped the permanent answer: Harness.Permanent is nil",
		"sinktest: skipped the retry-after answer: Harness.RetryAfter is nil",
		"sinktest: skipped the deadline: Harness.Hang is nil",
		"sinktest: skipped Close: the sink is not an io.Closer",
		"sinktest: skipped delivery ids: Harness.Received is nil",
		"sinktest: skipped DeliverBatch: the sink is not a sink.BatchSink",
		"sinktest: skipped DeliverDigest: the sink is not a sink.DigestSink",
		"sinktest: skipped Check: the sink is not a sink.Checker",
	}
	if got := rec.finish(); !slices.Equal(got, want) {
		t.Errorf("the kit reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A harness that spoils a delivery the sink delivers anyway is told so,
// rather than passing a batch check that proved nothing.
func TestRunRefusesASpoilThatSpoilsNothing(t *testing.T) {
	rec := &recorder{}
	h := memHarness(t, "")
	h.Spoil = func(*sink.Delivery) {}
	sinktest.Run(rec, h)
	if failures := rec.failures(); !slices.Contains(failures, "Deliver of a spoiled delivery succeeded: Harness.Spoil does not spoil it") {
		t.Errorf("the kit reported %q", failures)
	}
}

// SilentAddr accepts a connection and sends nothing on it.
func TestSilentAddrAcceptsAndNeverAnswers(t *testing.T) {
	c, err := net.Dial("tcp", sinktest.SilentAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("EHLO outboxd\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var ne net.Error
	if n, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("read %d bytes (%v), want a timeout", n, err)
	}
}

// webhookOnly is a sink that cannot check without sending a message.
type webhookOnly struct{ sink.Func }

func (webhookOnly) Check(context.Context) error { return sink.ErrCannotCheck }

// A sink that cannot check without sending passes Run's checker check, as
// the contract allows, and fails CheckChecker, which is for sinks that
// can.
func TestOnlyRunLetsASinkThatCannotCheckPass(t *testing.T) {
	s := webhookOnly{sink.Func(func(context.Context, *sink.Delivery) error { return nil })}
	run := &recorder{}
	sinktest.Run(run, sinktest.Harness{New: func(testing.TB) sink.Sink { return s }})
	if failures := run.failures(); len(failures) != 0 {
		t.Errorf("Run reported %q", failures)
	}
	direct := &recorder{}
	done := make(chan struct{})
	go func() { // its Fatalf ends the goroutine
		defer close(done)
		sinktest.CheckChecker(direct, s, nil, nil)
	}()
	<-done
	if failures := direct.failures(); len(failures) != 1 || !strings.Contains(failures[0], sink.ErrCannotCheck.Error()) {
		t.Errorf("CheckChecker reported %q, want its Check's ErrCannotCheck", failures)
	}
}
