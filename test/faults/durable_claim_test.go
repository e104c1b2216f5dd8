package faults_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// checksUncertain is a sink that declares it looks for an Uncertain
// attempt's effect (sink.UncertainChecker), as Slack does: its claims
// commit durably.
type checksUncertain struct{ sink.Sink }

func (checksUncertain) ChecksUncertain() bool { return true }

// durableClaimAppName names the relay's sessions in pg_stat_activity.
const durableClaimAppName = "outboxd-durable-claim-relay"

// A claim waits for the WAL flush only when it takes a row of a sink that
// checks Uncertain attempts: with a synchronous standby that never
// connects, a durable commit waits forever (wait_event SyncRep) and an
// asynchronous one returns at once. A plain sink's row is delivered; the
// claim of a checking sink's row waits for the standby, its row not
// delivered. The flush was most of a message's latency (docs/performance.md,
// "Where the latency went").
// (Mutations: durableSinks naming every sink of the claim, as claim.sql
// raising synchronous_commit for every claim did, fails the first half:
// the plain row is never delivered; durableSinks answering nil fails the
// second: no claim waits for the standby. Both seen.)
func TestOnlyClaimsOfSinksCheckingUncertainWaitForTheWALFlush(t *testing.T) {
	t.Parallel()
	pg := pgcluster.Start(t)
	ctx := t.Context()
	// The test's own commits must not wait for the standby.
	local := map[string]string{"synchronous_commit": "local"}
	admin := openPool(t, pg, local)
	ob := testdb.Open(t, "durableclaim")
	if _, err := ob.Migrate(ctx, admin); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{"ALTER SYSTEM SET synchronous_standby_names = 'never_connects'", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}

	var checkedDeliveries atomic.Int32
	checking := checksUncertain{sink.Func(func(context.Context, *sink.Delivery) error {
		checkedDeliveries.Add(1)
		return nil
	})}
	local["application_name"] = durableClaimAppName
	signals := testrelay.Run(t, openPool(t, pg, local), ob.Schema(), relay.Config{PollInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "plain", Sink: accept}, {Name: "checking", Sink: checking}}})

	enqueue(t, admin, ob, "plain", "plain", 1)
	signals.WaitWritten(t, 30*time.Second, "plain", "sent", 1)

	enqueue(t, admin, ob, "checking", "checking", 1)
	testrelay.WaitFor(t, 30*time.Second, "the claim of the checking sink's row to wait for the standby", func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'SyncRep'`,
			durableClaimAppName).Scan(&n)
		return err == nil && n > 0
	})
	if n := checkedDeliveries.Load(); n != 0 {
		t.Errorf("the checking sink's row was delivered %d times before its claim was durable", n)
	}
	// Let the waiting claim go, so the relay stops at once.
	for _, stmt := range []string{"ALTER SYSTEM SET synchronous_standby_names = ''", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
}
