// Package torture is the randomized combination test of issue 40: from a
// seed it draws a configuration of sinks (webhook sinks with and without
// rate limits and digests, Slack sinks limited per channel), breakers,
// max_attempts, relays and their crashes, and receivers with a fault
// schedule; it runs real `outboxd serve` processes against a real
// PostgreSQL, heals everything, drains, and checks every invariant
// docs/guarantees.md states about their combination.
//
// The files split the work: draw.go draws a configuration from a seed,
// faults.go is the receivers and their fault schedule, run.go runs one
// configuration and gathers what happened, invariants.go checks it. The
// tests (torture_test.go) run CI's seeds, the seeds `make torture` asks
// for, one seed given with -seed, and the named cases of issue 40's
// defects.
package torture

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// SinkKind is how a drawn sink reaches its receiver.
type SinkKind string

// The sink kinds a draw uses. A webhook sink names no rate key, so only a
// Slack sink (a rate key per channel) can be limited per key; its
// receiver answers as the Slack Web API does.
const (
	KindWebhook SinkKind = "webhook"
	KindSlack   SinkKind = "slack"
)

// Breaker is a sink's circuit breaker as the draw sets it. Default leaves
// circuit_breaker out of the configuration (the defaults of
// docs/configuration.md); otherwise the three numbers are written.
type Breaker struct {
	Default             bool
	ConsecutiveFailures int
	ProbeInterval       time.Duration
	MaxProbeInterval    time.Duration
}

// The breaker defaults of docs/configuration.md, which the draw needs to
// bound a receiver's requests and the wait after it heals.
const (
	defaultConsecutiveFailures = 5
	defaultProbeInterval       = 5 * time.Second
	defaultMaxProbeInterval    = 5 * time.Minute
)

// Settings returns the breaker's effective settings.
func (b Breaker) Settings() (failures int, probe, maxProbe time.Duration) {
	if b.Default {
		return defaultConsecutiveFailures, defaultProbeInterval, defaultMaxProbeInterval
	}
	return b.ConsecutiveFailures, b.ProbeInterval, b.MaxProbeInterval
}

// Digest is a sink's digest block.
type Digest struct {
	Window      time.Duration
	MaxMessages int
}

// Sink is one drawn sink and the messages enqueued for it.
type Sink struct {
	Name string
	Kind SinkKind
	// Rate, Per and Burst are rate_limit; Rate 0 is no limit.
	Rate  int
	Per   time.Duration
	Burst int
	// PerKey is rate_limit.per_key (Slack sinks only).
	PerKey bool
	// Channels are a Slack sink's channels, its rate keys; messages go to
	// them in turn.
	Channels    []string
	Digest      *Digest
	MaxAttempts int
	MaxInFlight int
	Breaker     Breaker
	// Receiver is the index of the receiver (Config.Receivers) it posts to.
	Receiver int
	// Messages is how many messages are enqueued for the sink, spread over
	// Config.EnqueueFor.
	Messages int
	// OrderingKeys is how many ordering keys its messages share in turn; 0
	// enqueues them without one.
	OrderingKeys int
	// PoisonEvery makes every PoisonEvery-th message one the receiver
	// refuses for good (400); 0 makes none.
	PoisonEvery int
}

// Interval is the even spacing of the sink's deliveries (per rate key),
// 0 without a limit.
func (s Sink) Interval() time.Duration {
	if s.Rate == 0 {
		return 0
	}
	return s.Per / time.Duration(s.Rate)
}

// Poisoned reports whether the sink's i-th message (from 0) is refused for
// good by the receiver.
func (s Sink) Poisoned(i int) bool { return s.PoisonEvery > 0 && i%s.PoisonEvery == s.PoisonEvery-1 }

// ProcKind is what happens to a relay process.
type ProcKind string

// The relay crashes a draw schedules.
const (
	// ProcKill SIGKILLs the relay and starts a new one in its place.
	ProcKill ProcKind = "sigkill"
	// ProcStop SIGSTOPs the relay and SIGCONTs it For later.
	ProcStop ProcKind = "sigstop"
)

// ProcEvent is one scheduled crash: At after the start, of relay number
// Relay (an index into the relays running then).
type ProcEvent struct {
	Kind  ProcKind
	At    time.Duration
	Relay int
	For   time.Duration // ProcStop only
}

// Config is one drawn run.
type Config struct {
	// Name is the seed ("seed 42") or the named case that made it.
	Name        string
	Relays      int
	Lease       time.Duration
	Concurrency int
	// EnqueueFor spreads each sink's messages over this long from the
	// start.
	EnqueueFor time.Duration
	Sinks      []Sink
	Receivers  []Schedule
	Procs      []ProcEvent
}

// pollInterval is the relays' poll_interval: short, so that a missed
// wake-up costs little of a run's bounded time.
const pollInterval = 250 * time.Millisecond

// backoff is every sink's backoff, short so that retries fit in a run.
const (
	backoffInitial = 100 * time.Millisecond
	backoffMax     = time.Second
)

// sinkTimeout is every sink's request timeout: well inside the lease, and
// well above the slowest answer a schedule draws, so that a slow answer is
// slow and not a timeout.
const sinkTimeout = 2 * time.Second

// The bounds of a draw.
const (
	maxRelays      = 3
	maxSinks       = 3
	maxReceivers   = 2
	faultPhase     = 12 * time.Second // windows and crashes happen in the first faultPhase
	minMessages    = 8
	maxMessages    = 40
	maxMaxAttempts = 10
)

// Draw returns the configuration of seed: the same seed always draws the
// same configuration (the run's timing is the machine's).
func Draw(seed uint64) Config {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := Config{
		Name:        fmt.Sprintf("seed %d", seed),
		Relays:      1 + rng.IntN(maxRelays),
		Lease:       []time.Duration{3 * time.Second, 5 * time.Second}[rng.IntN(2)],
		Concurrency: 2 + rng.IntN(7),
		EnqueueFor:  time.Duration(2+rng.IntN(8)) * time.Second,
	}
	nReceivers := 1 + rng.IntN(maxReceivers)
	for range nReceivers {
		c.Receivers = append(c.Receivers, drawSchedule(rng, c.Lease))
	}
	for i := range 1 + rng.IntN(maxSinks) {
		c.Sinks = append(c.Sinks, drawSink(rng, i, nReceivers, c.Lease))
	}
	if c.Relays > 1 || rng.IntN(2) == 0 {
		for range rng.IntN(3) {
			ev := ProcEvent{Kind: ProcKill, At: time.Duration(1+rng.IntN(int(faultPhase/time.Second)-2)) * time.Second, Relay: rng.IntN(c.Relays)}
			if rng.IntN(2) == 0 {
				ev.Kind, ev.For = ProcStop, time.Duration(500+rng.IntN(4000))*time.Millisecond
			}
			c.Procs = append(c.Procs, ev)
		}
		slices.SortStableFunc(c.Procs, func(a, b ProcEvent) int { return cmp.Compare(a.At, b.At) })
	}
	return c
}

// drawSink draws sink number i.
func drawSink(rng *rand.Rand, i, receivers int, lease time.Duration) Sink {
	s := Sink{
		Name:        fmt.Sprintf("s%d", i),
		Kind:        KindWebhook,
		MaxAttempts: 1 + rng.IntN(maxMaxAttempts),
		MaxInFlight: 1 + rng.IntN(8),
		Receiver:    rng.IntN(receivers),
		Messages:    minMessages + rng.IntN(maxMessages-minMessages+1),
	}
	if rng.IntN(3) == 0 {
		s.Kind, s.PerKey = KindSlack, true
		for k := range 1 + rng.IntN(3) {
			s.Channels = append(s.Channels, fmt.Sprintf("C%d%dTORTURE", i, k))
		}
	}
	// Rates faster and slower than the lease; a Slack sink always has one
	// (its type's own would be 1/s anyway).
	if s.Kind == KindSlack || rng.IntN(3) > 0 {
		s.Rate, s.Burst = 1+rng.IntN(3), 1+rng.IntN(2)
		perMillis := []int{500, 1000, 2000, int(lease.Milliseconds()) * 3 / 2}[rng.IntN(4)]
		s.Per = time.Duration(perMillis*s.Rate) * time.Millisecond
		if s.Per > 4*time.Second {
			s.Per = time.Duration(perMillis) * time.Millisecond
			s.Rate = 1
		}
		// Keep the backlog's drain at the limit within about 20 s per key.
		keys := max(1, len(s.Channels))
		if limit := int(20*time.Second/s.Interval()) * keys; s.Messages > limit {
			s.Messages = max(keys, limit)
		}
	}
	if s.Kind == KindWebhook && rng.IntN(3) == 0 {
		s.Digest = &Digest{Window: time.Duration(300+rng.IntN(900)) * time.Millisecond, MaxMessages: 2 + rng.IntN(9)}
	}
	if s.Digest == nil && rng.IntN(2) == 0 {
		s.OrderingKeys = 1 + rng.IntN(3)
	}
	if s.Digest == nil && rng.IntN(2) == 0 {
		s.PoisonEvery = 4 + rng.IntN(8)
	}
	if rng.IntN(2) == 0 {
		s.Breaker.Default = true
	} else {
		s.Breaker = Breaker{ConsecutiveFailures: 2 + rng.IntN(5), ProbeInterval: time.Duration(500+rng.IntN(1500)) * time.Millisecond}
		s.Breaker.MaxProbeInterval = s.Breaker.ProbeInterval * 4
	}
	return s
}

// String is the configuration as a failing run prints it.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d relays, lease %s, concurrency %d, enqueue over %s\n", c.Name, c.Relays, c.Lease, c.Concurrency, c.EnqueueFor)
	for _, s := range c.Sinks {
		fmt.Fprintf(&b, "  sink %s: %s, %d messages, max_attempts %d, max_in_flight %d, receiver %d", s.Name, s.Kind, s.Messages, s.MaxAttempts, s.MaxInFlight, s.Receiver)
		if s.Rate > 0 {
			fmt.Fprintf(&b, ", rate %d per %s burst %d (per_key %v)", s.Rate, s.Per, s.Burst, s.PerKey)
		}
		if len(s.Channels) > 0 {
			fmt.Fprintf(&b, ", channels %v", s.Channels)
		}
		if s.Digest != nil {
			fmt.Fprintf(&b, ", digest window %s max %d", s.Digest.Window, s.Digest.MaxMessages)
		}
		if s.OrderingKeys > 0 {
			fmt.Fprintf(&b, ", %d ordering keys", s.OrderingKeys)
		}
		if s.PoisonEvery > 0 {
			fmt.Fprintf(&b, ", poison every %d", s.PoisonEvery)
		}
		f, p, mp := s.Breaker.Settings()
		fmt.Fprintf(&b, ", breaker (default %v) %d failures, probe %s..%s\n", s.Breaker.Default, f, p, mp)
	}
	for i, r := range c.Receivers {
		fmt.Fprintf(&b, "  receiver %d: %s\n", i, r)
	}
	for _, p := range c.Procs {
		fmt.Fprintf(&b, "  at %s: %s relay %d", p.At, p.Kind, p.Relay)
		if p.Kind == ProcStop {
			fmt.Fprintf(&b, " for %s", p.For)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// yaml writes the plugins.yaml of one relay: every sink posts to its
// receiver's URL under a path naming the sink and the relay, so the
// receiver knows who sent each request.
func (c Config) yaml(dbURL, schema, relay string, receiverURL []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "database:\n  url: %s\n  schema: %s\nrelay:\n  lease: %s\n  poll_interval: %s\n  concurrency: %d\nhttp:\n  listen: 127.0.0.1:0\nsinks:\n",
		dbURL, schema, c.Lease, pollInterval, c.Concurrency)
	for _, s := range c.Sinks {
		fmt.Fprintf(&b, "  %s:\n    type: %s\n    max_attempts: %d\n    max_in_flight: %d\n    backoff: {initial: %s, max: %s}\n",
			s.Name, s.Kind, s.MaxAttempts, s.MaxInFlight, backoffInitial, backoffMax)
		if s.Rate > 0 {
			fmt.Fprintf(&b, "    rate_limit: {rate: %d, per: %s, burst: %d, per_key: %v}\n", s.Rate, s.Per, s.Burst, s.PerKey)
		}
		if !s.Breaker.Default {
			fmt.Fprintf(&b, "    circuit_breaker: {consecutive_failures: %d, probe_interval: %s, max_probe_interval: %s}\n",
				s.Breaker.ConsecutiveFailures, s.Breaker.ProbeInterval, s.Breaker.MaxProbeInterval)
		}
		if s.Digest != nil {
			fmt.Fprintf(&b, "    digest: {window: %s, max_messages: %d}\n", s.Digest.Window, s.Digest.MaxMessages)
		}
		base := fmt.Sprintf("%s/%s/%s", receiverURL[s.Receiver], s.Name, relay)
		switch s.Kind {
		case KindSlack:
			fmt.Fprintf(&b, "    options: {token: xoxb-torture, api_url: %s/api/, dedupe: false}\n", base)
		default:
			fmt.Fprintf(&b, "    options: {url: %s, allow_private: true, timeout: %s, secret: %s}\n", base, sinkTimeout, webhookSecret)
		}
	}
	return b.String()
}

// webhookSecret signs the webhook sinks' requests (the receivers do not
// check it: test/chaos does).
const webhookSecret = "whsec_dG9ydHVyZS10ZXN0LXNpZ25pbmcta2V5LTAxMjM0NTY3"
