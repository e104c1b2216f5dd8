package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// startTimes records when each delivery started.
type startTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (s *startTimes) add() time.Time {
	now := time.Now()
	s.mu.Lock()
	s.times = append(s.times, now)
	s.mu.Unlock()
	return now
}

func (s *startTimes) sorted() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]time.Time(nil), s.times...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// Three relays share one sink's limit: at most rate+burst deliveries start
// in any one-second window. (Mutation: a limiter row per relay instead of
// per sink starts 16 in a window.)
func TestRateLimitHoldsAcrossRelays(t *testing.T) {
	b := coretest.Setup(t)
	const n = 60
	limit := sink.RateLimit{Rate: 5, Per: time.Second, Burst: 1}
	var starts startTimes
	fake := sink.Func(func(context.Context, *sink.Delivery) error { starts.add(); return nil })
	cfg := relay.Config{PollInterval: 50 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "limited", Sink: fake, RateLimit: &limit}}}
	signals := &relaysignal.Relay{}
	for range 3 {
		testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
	}
	b.EnqueueN(t, "limited", n, nil)
	signals.WaitWritten(t, time.Minute, "limited", "sent", n)
	times := starts.sorted()
	if len(times) != n {
		t.Fatalf("%d deliveries, want %d", len(times), n)
	}
	if got := testrelay.MaxInWindow(times, time.Second); got > limit.Rate+limit.Burst {
		t.Fatalf("%d deliveries started within one second; the cluster-wide limit allows %d+%d", got, limit.Rate, limit.Burst)
	}
	// Three relays at 5/s must not be throttled to far below 5/s either.
	if took := times[n-1].Sub(times[0]); took > 20*time.Second {
		t.Fatalf("60 deliveries at 5/s took %s", took)
	}
}

// A Retry-After answered to one relay pauses the sink on all three: the
// sink's 10/s limit spreads 30 deliveries over three seconds, so every
// relay holds rows and permits when the fifth delivery gets a 429, and
// nothing starts until its pause has passed. (Mutation: a pause kept only
// by the relay that got the 429 starts deliveries inside it.)
func TestRetryAfterPausesTheSinkOnEveryRelay(t *testing.T) {
	b := coretest.Setup(t)
	const (
		pause       = time.Second
		messages    = 30
		throttledAt = 5 // the delivery that gets the 429
	)
	limit := sink.RateLimit{Rate: 10, Per: time.Second, Burst: 1}
	var (
		starts   startTimes
		mu       sync.Mutex
		pausedAt time.Time
		started  int
	)
	fake := sink.Func(func(context.Context, *sink.Delivery) error {
		now := starts.add()
		mu.Lock()
		defer mu.Unlock()
		if started++; started == throttledAt {
			pausedAt = now
			return sink.RetryAfter(pause, errors.New("429 Too Many Requests"))
		}
		return nil
	})
	other := coretest.NewRecordingSink()
	cfg := relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "busy", Sink: fake, MaxInFlight: 1, RateLimit: &limit}, {Name: "other", Sink: other}}}
	signals := &relaysignal.Relay{}
	for range 3 {
		testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
	}
	b.EnqueueN(t, "busy", messages, nil)
	signals.WaitWritten(t, 30*time.Second, "busy", "sent", messages)
	mu.Lock()
	defer mu.Unlock()
	// A delivery another relay had already dispatched when the 429 came
	// back may still go out: the pause reaches it by notification, within
	// dispatchGrace. Nothing may start after that until the pause ends.
	const dispatchGrace = 300 * time.Millisecond
	resumed := 0
	for _, at := range starts.sorted() {
		if at.After(pausedAt.Add(dispatchGrace)) && at.Before(pausedAt.Add(pause-50*time.Millisecond)) {
			t.Fatalf("a delivery started %s after the 429, inside its %s Retry-After", at.Sub(pausedAt), pause)
		}
		if at.After(pausedAt.Add(pause - 50*time.Millisecond)) {
			resumed++
		}
	}
	// Most rows must still have been waiting when the 429 came, or the
	// check above proves nothing.
	if resumed < messages/2 {
		t.Fatalf("only %d of %d deliveries started after the pause; the 429 came too late to test it", resumed, messages)
	}
	// Other sinks keep flowing while one is paused.
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "other", DedupKey: "x", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 5*time.Second, "other", "sent", 1)
	if n := len(other.Snapshot()); n != 1 {
		t.Fatalf("the other sink got %d deliveries, want 1", n)
	}
}

// keyedSink names each delivery's rate key (its receiver) by its
// payload's "to" and records when each delivery to each receiver started.
type keyedSink struct {
	mu     sync.Mutex
	starts map[string]*startTimes
	relays map[string]map[int]bool // by key, the relays that delivered to it
}

// keyedSinkOf is the keyedSink as relay number relay runs it.
type keyedSinkOf struct {
	*keyedSink
	relay int
}

func (s keyedSinkOf) Deliver(ctx context.Context, d *sink.Delivery) error {
	if key, err := s.RateKey(d); err == nil {
		s.mu.Lock()
		if s.relays[key] == nil {
			s.relays[key] = map[int]bool{}
		}
		s.relays[key][s.relay] = true
		s.mu.Unlock()
	}
	return s.keyedSink.Deliver(ctx, d)
}

func (s *keyedSink) RateKey(d *sink.Delivery) (string, error) {
	var p struct{ To string }
	if err := json.Unmarshal(d.Payload, &p); err != nil || p.To == "" {
		return "", sink.Permanent(errors.New("no receiver"))
	}
	return p.To, nil
}

func (s *keyedSink) Deliver(_ context.Context, d *sink.Delivery) error {
	key, err := s.RateKey(d)
	if err != nil {
		return err
	}
	s.mu.Lock()
	st := s.starts[key]
	if st == nil {
		st = &startTimes{}
		s.starts[key] = st
	}
	s.mu.Unlock()
	st.add()
	return nil
}

// With per_key, each receiver gets the whole limit, across relays, and
// a busy receiver does not hold up another. Two slots per relay spread
// each receiver's rows over the relays. (Mutations: ReserveKeys keeping
// a row per relay, its sink named with the limiter's address, fails this
// test: a receiver gets 4-6 deliveries within a second; groupByKey
// giving every row one key fails it: at most 3 over both receivers.)
func TestPerKeyRateLimitHoldsPerReceiverAcrossRelays(t *testing.T) {
	b := coretest.Setup(t)
	const perKey = 6
	limit := sink.RateLimit{Rate: 2, Per: time.Second, Burst: 1, PerKey: true}
	keyed := &keyedSink{starts: map[string]*startTimes{}, relays: map[string]map[int]bool{}}
	signals := &relaysignal.Relay{}
	for i := range 3 {
		cfg := relay.Config{PollInterval: 50 * time.Millisecond, MaintenanceInterval: 100 * time.Millisecond,
			Sinks: []relay.SinkConfig{{Name: "keyed", Sink: keyedSinkOf{keyed, i}, MaxInFlight: 2, RateLimit: &limit}}}
		testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
	}
	b.EnqueueN(t, "keyed", 2*perKey+1, func(i int, m *outboxd.Message) {
		m.Payload = map[string]string{"to": []string{"a", "b", ""}[min(i/perKey, 2)]}
	})
	signals.WaitWritten(t, time.Minute, "keyed", "sent", 2*perKey)
	signals.WaitWritten(t, time.Minute, "keyed", "dead", 1)
	a, bb := keyed.starts["a"].sorted(), keyed.starts["b"].sorted()
	for key, times := range map[string][]time.Time{"a": a, "b": bb} {
		if len(times) != perKey {
			t.Fatalf("receiver %s: %d deliveries, want %d", key, len(times), perKey)
		}
		if got := testrelay.MaxInWindow(times, time.Second); got > limit.Rate+limit.Burst {
			t.Errorf("receiver %s: %d deliveries within one second, the limit allows %d+%d", key, got, limit.Rate, limit.Burst)
		}
	}
	// Were all of a receiver's rows delivered by one relay, the limit
	// would hold with a limiter per relay as well.
	keyed.mu.Lock()
	relaysA, relaysB := len(keyed.relays["a"]), len(keyed.relays["b"])
	keyed.mu.Unlock()
	if relaysA < 2 || relaysB < 2 {
		t.Fatalf("receivers a and b were delivered by %d and %d relays; want at least 2 each, or the limit was not shared", relaysA, relaysB)
	}
	// In parallel: b's deliveries did not wait for a's to end, and
	// together they went faster than one receiver may.
	if !bb[0].Before(a[perKey-1]) || !a[0].Before(bb[perKey-1]) {
		t.Errorf("one receiver waited for the other: a %v..%v, b %v..%v", a[0], a[perKey-1], bb[0], bb[perKey-1])
	}
	all := append(slices.Clone(a), bb...)
	slices.SortFunc(all, func(x, y time.Time) int { return x.Compare(y) })
	if got := testrelay.MaxInWindow(all, time.Second); got <= limit.Rate+limit.Burst {
		t.Errorf("at most %d deliveries within a second over both receivers: the limit held for the sink as a whole", got)
	}
	// Idle keys' rows are pruned by maintenance once their permits are due.
	// This polls: what it waits for is the clock passing those permits.
	testrelay.WaitFor(t, 10*time.Second, "idle per-key limits pruned", func() bool {
		var n int
		err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+b.Outbox.Schema()+".sink_key_limits").Scan(&n)
		return err == nil && n == 0
	})
}

// A sink whose destinations have limits of their own is limited per key
// or refused. (Mutation: dropping the KeyRateLimit check in effective
// lets it run with one limit for all its destinations.)
func TestKeyRateLimitNeedsAPerKeyLimit(t *testing.T) {
	s := keyedSinkOf{&keyedSink{}, 0}
	_, err := relay.New(nil, nil, nil, relay.Config{Sinks: []relay.SinkConfig{{Name: "partners", Sink: s,
		RateLimit: &sink.RateLimit{Rate: 5, Per: time.Second}, KeyRateLimit: ownLimits(nil)}}})
	if err == nil || !strings.Contains(err.Error(), "PerKey: must be set") {
		t.Fatalf("relay.New: %v, want an error about PerKey", err)
	}
}

func TestPerKeyRateLimitNeedsARateKeyer(t *testing.T) {
	plain := sink.Func(func(context.Context, *sink.Delivery) error { return nil })
	_, err := relay.New(nil, nil, nil, relay.Config{Sinks: []relay.SinkConfig{{Name: "plain", Sink: plain,
		RateLimit: &sink.RateLimit{Rate: 1, Per: time.Second, PerKey: true}}}})
	if err == nil || !strings.Contains(err.Error(), "PerKey: needs a sink that names each delivery's rate key") {
		t.Fatalf("relay.New: %v, want an error about PerKey", err)
	}
}

// ownLimits is a SinkConfig.KeyRateLimit giving the keys in limits a
// rate limit of their own.
func ownLimits(limits map[string]sink.RateLimit) func(context.Context, string) (sink.RateLimit, bool) {
	return func(_ context.Context, key string) (sink.RateLimit, bool) {
		l, ok := limits[key]
		return l, ok
	}
}

// A key the sink's configuration gives a limit of its own
// (SinkConfig.KeyRateLimit, as destinations.HookRelay does for a
// destination's rate_limit) is spaced by it
// across relays, while the sink's other keys keep the sink's faster limit
// and do not wait for it. (Mutations: keyLimits ignoring the sink's own
// limits delivers "a-slow" at the sink's 20 a second; reserve_key_permits
// spacing every key by the first key's interval slows "b-fast" down to
// "a-slow"'s pace.)
func TestKeyRateLimitGivesADestinationItsOwnLimit(t *testing.T) {
	b := coretest.Setup(t)
	const slowRows, fastRows = 7, 20
	sinkLimit := sink.RateLimit{Rate: 20, Per: time.Second, Burst: 20, PerKey: true}
	own := map[string]sink.RateLimit{"a-slow": {Rate: 2, Per: time.Second, Burst: 1}}
	keyed := &keyedSink{starts: map[string]*startTimes{}, relays: map[string]map[int]bool{}}
	signals := &relaysignal.Relay{}
	for i := range 2 {
		cfg := relay.Config{PollInterval: 50 * time.Millisecond,
			Sinks: []relay.SinkConfig{{Name: "keyed", Sink: keyedSinkOf{keyed, i}, MaxInFlight: 4, RateLimit: &sinkLimit, KeyRateLimit: ownLimits(own)}}}
		testrelay.RunWith(t, testdb.Pool(t, 3), b.Outbox.Schema(), cfg, signals)
	}
	// The keys alternate, so each claim holds both, and "a-slow" comes
	// first in each reservation (keys go sorted): its rows would hold
	// "b-fast" up if they shared a pace.
	b.EnqueueN(t, "keyed", slowRows+fastRows, func(i int, m *outboxd.Message) {
		m.Payload = map[string]string{"to": map[bool]string{true: "a-slow", false: "b-fast"}[i%2 == 0 && i < 2*slowRows]}
	})
	signals.WaitWritten(t, time.Minute, "keyed", "sent", slowRows+fastRows)
	slow, fast := keyed.starts["a-slow"].sorted(), keyed.starts["b-fast"].sorted()
	if got := testrelay.MaxInWindow(slow, time.Second); got > 3 {
		t.Errorf("destination a-slow: %d deliveries within one second, its own limit allows 2+1", got)
	}
	// 7 deliveries at 2 a second, the first at once: 3 seconds at least.
	if span := slow[len(slow)-1].Sub(slow[0]); span < 2700*time.Millisecond {
		t.Errorf("destination a-slow's %d deliveries took %s, want about 3s at its 2 a second", len(slow), span)
	}
	// At the sink's 20 a second b-fast's 20 rows are out within about
	// 0.4s; spaced by a-slow's interval their last came at 2.4-4.4s. The
	// bound, a-slow's fifth delivery (2s), leaves a loaded machine's claims
	// room: a-slow's third (1s) did not, CI once saw b-fast's last at 1.16s.
	const fifth = 4
	if !fast[len(fast)-1].Before(slow[fifth]) {
		t.Errorf("destination b-fast's last delivery (%s after a-slow's first) came after a-slow's fifth (%s): it waited at a-slow's pace",
			fast[len(fast)-1].Sub(slow[0]), slow[fifth].Sub(slow[0]))
	}
}

// hangingKeySink is a keyedSink whose deliveries to key "a-hang" block
// until release is closed, counting how many are under way at once.
type hangingKeySink struct {
	*keyedSink
	release           chan struct{}
	hanging, mostHung atomic.Int64
}

func (s *hangingKeySink) Deliver(ctx context.Context, d *sink.Delivery) error {
	if key, _ := s.RateKey(d); key == "a-hang" {
		n := s.hanging.Add(1)
		defer s.hanging.Add(-1)
		for {
			most := s.mostHung.Load()
			if n <= most || s.mostHung.CompareAndSwap(most, n) {
				break
			}
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.keyedSink.Deliver(ctx, d)
}

// One receiver that hangs holds at most its share of a per-key sink's
// slots (an eighth: 2 of 16), so the sink's other receivers keep being
// delivered meanwhile, and its rows wait in the table, not in the relay.
// (Mutation: keySlots returning MaxInFlight fails this test: the hanging
// receiver held all 16 slots and b-fast's rows waited for it.)
func TestHangingReceiverHoldsOnlyItsShareOfTheSlots(t *testing.T) {
	const fastRowsWait = 90 * time.Second
	b := coretest.Setup(t)
	const hangRows, fastRows, slots = 40, 40, 16
	limit := sink.RateLimit{Rate: 1000, Per: time.Second, Burst: 100, PerKey: true}
	hang := &hangingKeySink{keyedSink: &keyedSink{starts: map[string]*startTimes{}, relays: map[string]map[int]bool{}}, release: make(chan struct{})}
	signals := &relaysignal.Relay{}
	cfg := relay.Config{PollInterval: 50 * time.Millisecond, Lease: time.Minute,
		Sinks: []relay.SinkConfig{{Name: "keyed", Sink: hang, MaxInFlight: slots, RateLimit: &limit}}}
	testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), cfg, signals)
	// The hanging receiver's rows come first in every claim.
	b.EnqueueN(t, "keyed", hangRows, func(_ int, m *outboxd.Message) { m.Payload = map[string]string{"to": "a-hang"} })
	testrelay.WaitFor(t, 30*time.Second, "a-hang's deliveries to start", func() bool { return hang.hanging.Load() > 0 })
	b.EnqueueN(t, "keyed", fastRows, func(i int, m *outboxd.Message) {
		m.DedupKey, m.Payload = fmt.Sprintf("fast-%d", i), map[string]string{"to": "b-fast"}
	})
	// b-fast's rows step past a-hang's, handed back at each claim, at
	// about 1.6 a second (24 s for the 40 on a quiet machine, the same at
	// 5ddfb22): a bound for "delivered meanwhile", not a pace; the
	// mutation below never delivers them.
	signals.WaitWritten(t, fastRowsWait, "keyed", "sent", fastRows)
	if most := hang.mostHung.Load(); most > slots/8 {
		t.Errorf("the hanging receiver held %d slots at once, want at most %d of %d", most, slots/8, slots)
	}
	close(hang.release)
	signals.WaitWritten(t, time.Minute, "keyed", "sent", hangRows+fastRows)
}
