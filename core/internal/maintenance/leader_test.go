package maintenance_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// Of two relays taking part in the election, one leads at a time; when it
// stops, the other takes the lead once the lease has run out, and the
// stopped one no longer says it leads.
//
// Mutation checked: round storing true when another relay holds the lead
// (the pgx.ErrNoRows case) makes both lead, which fails the test.
func TestOneRelayLeadsAndTheLeadMovesWhenItStops(t *testing.T) {
	b, env := setup(t)
	const interval = 50 * time.Millisecond
	a, c := maintenance.NewLeader(env, "a", interval), maintenance.NewLeader(env, "c", interval)
	start(t, b.Ctx, a)
	start(t, b.Ctx, c)
	<-a.Elected()
	<-c.Elected()
	testrelay.WaitFor(t, 10*time.Second, "one relay leading", func() bool { return a.Leading() != c.Leading() })
	// Each round both relays try for the lead; checked over ten rounds,
	// never both hold it.
	checkedFrom := time.Now()
	testrelay.WaitFor(t, 20*time.Second, "ten rounds checked", func() bool {
		if a.Leading() && c.Leading() {
			t.Fatal("both relays lead")
		}
		return time.Since(checkedFrom) > 10*interval
	})
	first, second := a, c
	if c.Leading() {
		first, second = c, a
	}
	first.Stop()
	if first.Leading() {
		t.Fatal("a stopped relay still says it leads")
	}
	// The lease runs out after a few missed rounds; bounds are generous
	// for a loaded machine.
	testrelay.WaitFor(t, 20*time.Second, "the other relay taking over", second.Leading)
}
