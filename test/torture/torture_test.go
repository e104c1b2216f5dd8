package torture

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// binary is the outboxd binary, built once by TestMain.
var binary string

func TestMain(m *testing.M) { proc.MainWithBinary(m, &binary) }

var (
	seedFlag  = flag.Uint64("seed", 0, "TestTorture: replay this seed alone (a failing run prints its seed)")
	seedsFlag = flag.Int("seeds", 0, "TestTorture: run this many seeds from -first instead of CI's (make torture SEEDS=n)")
	firstFlag = flag.Uint64("first", 0, "TestTorture: the first of the -seeds seeds; 0 picks one at random and prints it")
)

// ciSeeds are the seeds `go test ./...` runs, each passing at least
// three times out of three on a loaded machine (load 20-27 on two cores)
// when chosen (71e99b5 and the Slack sink's status fix, acc608e). Two
// seeds keep the package near four minutes beside the named cases (about
// 195 s of them). Seeds 10 and 12 passed three times as well. Seed 4 once
// broke OneMemberListPerDelivery (a digest's delivery id resent with a
// member fewer: a joined member lacked its deferrals, fixed in c693bb7,
// TestJoinedMemberSharesItsDigestsFate); it passed two replays since and
// stays out of CI for the package's time. Seed 11 stays out: its open
// channels' rows are no longer claimed at every probe (a1ada7b), but its
// one-channel Slack sink on three relays still has rows handed back
// when the relays race for the channel's permits, near its
// RowWritesPerDelivery bound (608, 495, 596, 615 and 561 updates in five
// runs against bounds of 570-609; three passed).
var ciSeeds = []uint64{
	6, // two relays, each SIGSTOPped; two digested webhooks, max_attempts 2 and 5 at or below their breakers' thresholds; 503, slow answers, 503 again
	8, // three relays; two Slack sinks of three channels each and a webhook at 1 per 7.5 s with ordering keys; 429 with Retry-After 0, slow answers, then 429 with Retry-After 6 s (longer than the lease)
}

// seeds returns the seeds TestTorture runs: -seed, else -seeds from
// -first, else ciSeeds.
func seeds(t *testing.T) []uint64 {
	replay := false
	flag.Visit(func(f *flag.Flag) { replay = replay || f.Name == "seed" })
	switch {
	case replay:
		return []uint64{*seedFlag}
	case *seedsFlag > 0:
		first := *firstFlag
		if first == 0 {
			first = rand.Uint64N(1 << 32)
		}
		t.Logf("seeds %d..%d (-first %d)", first, first+uint64(*seedsFlag)-1, first)
		out := make([]uint64, *seedsFlag)
		for i := range out {
			out[i] = first + uint64(i)
		}
		return out
	}
	return ciSeeds
}

// TestTorture runs the drawn configurations of its seeds (see seeds) and
// checks every invariant of invariants.go on each. A failing seed prints
// its configuration and how to replay it.
//
// Mutations tried: the configuration dropping every sink's rate_limit
// (config/core.go) fails seed 5 (RateLimitsHeld, both per sink and per
// Slack channel); the webhook sink taking a 503 without Retry-After for a
// permanent refusal (sinks/httpstatus.go) fails seed 1
// (NothingDeadThatWouldBeAccepted). The named cases (TestTortureCase) are
// the product's own defects, each failing on the code before its fix.
func TestTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("torture: skipped in -short mode")
	}
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runAndCheck(t, Draw(seed), Hooks{}, nil)
		})
	}
}

// runAndCheck runs c, checks the invariants and extra, and reports the
// run's figures; on a violation it prints the configuration and how to
// replay it.
func runAndCheck(t *testing.T, c Config, hooks Hooks, extra func(*Outcome) []Violation) *Outcome {
	t.Helper()
	o := Run(t, binary, c, hooks)
	vs := Check(o)
	if extra != nil {
		vs = append(vs, extra(o)...)
	}
	sent, dead := 0, 0
	for _, r := range o.Rows {
		switch r.Status {
		case status.Sent:
			sent++
		case status.Dead:
			dead++
		}
	}
	drain := "not drained"
	if !o.DrainedAt.IsZero() {
		drain = o.DrainedAt.Sub(o.HealedAt).Round(time.Millisecond).String()
	}
	t.Logf("%s: %d rows (%d sent, %d dead), %d requests, %d refused attempts, %d crashes, drained %s after healing (bound %s), %d row updates (%.2f per request)",
		c.Name, len(o.Rows), sent, dead, len(o.Arrivals), o.RefusedAttempts, len(o.Procs), drain, DrainBound(c), o.RowUpdates,
		float64(o.RowUpdates)/float64(max(1, len(o.Arrivals))))
	if len(vs) > 0 {
		var b strings.Builder
		for _, v := range vs {
			b.WriteString("  " + v.String() + "\n")
		}
		replay := "go test ./test/torture -run 'TestTortureCase/" + c.Name + "$'"
		if seed, ok := strings.CutPrefix(c.Name, "seed "); ok {
			replay = "go test ./test/torture -run 'TestTorture$' -seed " + seed
		}
		t.Errorf("%s broke %d promises (replay: %s)\nconfiguration:\n%s\nviolations:\n%s", c.Name, len(vs), replay, c, b.String())
	}
	return o
}
