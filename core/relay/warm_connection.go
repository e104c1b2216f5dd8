package relay

import (
	"context"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/internal/store"
)

// relayMinConns is how many connections the relay's pool opens as it
// starts, and keeps (fewer when the pool allows fewer): warmed before the
// first rows come, and as many as a relay at rest uses (a claim loop, the
// terminal writer, the listener, the periodic reads of pauses, breakers
// and statistics). A connection the pool opens later, for a claim, makes
// that claim wait for the warming; it would have waited for the cold
// plans.
const relayMinConns = 4

// warmConnection plans the claim and the terminal write on conn, a
// connection the relay's pool has just opened, without running them
// (store.PlanOnly). A new backend reads the catalog entries of every
// table, index and function a statement names the first time it plans
// it: the claim's first plans on a new connection took 9-25 ms against
// 0.1 ms cached, and each such claim held up the pickups behind it (the
// latency benchmark's p99, 15-20 ms against River's 4-5, was made of
// them: the pool opens its connections as deliveries start). Planned
// here, the cost is paid before the connection serves a claim. A failure
// (a schema not yet migrated) leaves the connection cold, no worse.
func (r *Relay) warmConnection(ctx context.Context, conn *pgx.Conn) {
	db := store.PlanOnly(conn)
	_, err := r.q.ClaimInto(ctx, db, store.ClaimParams{Sinks: slices.Sorted(maps.Keys(r.sinks)), Limit: r.cfg.BatchSize,
		AliveFor: r.aliveFor(), Lease: r.cfg.Lease}, nil)
	if err == nil {
		// One delivered outcome: an id and a token alone (see finish.sql).
		_, err = r.q.Finish(ctx, db, store.FinishParams{IDs: []int64{0}, Tokens: [][16]byte{{}}, DeleteSent: r.cfg.DeleteOnSent})
	}
	if err != nil {
		r.logger.Debug("outbox: could not plan the relay's statements on a new connection before its first use", "error", err)
	}
}
