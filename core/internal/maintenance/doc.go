// Package maintenance holds the relay's services: the duties a relay has
// beside claiming and delivering rows, each a [Service] with a Start and a
// Stop of its own, so the relay (package relay) keeps its claim loops and
// dispatch only and starts and stops these around them.
//
//   - [Leader]: the one leader election of the cluster (a lease row); the
//     services that do the cluster's chores run on the leading relay only.
//   - [StatsSnapshot]: the row counts the operator's stats and gauges read,
//     recomputed by the leader.
//   - [History]: the rotation and truncation of messages_history's slots,
//     by the leader.
//   - [Maintenance]: the leader's pruning of the other tables that grow
//     (audit trail, digests, threads, per-key limits, dropped events,
//     wake-up registrations, delivery counts).
//   - [DeliveryMinutes]: every relay's per-minute delivery counts, which
//     the console's rates and latencies come from.
//   - [Unconfigured]: every relay's warning, and gauges, about rows waiting
//     for sinks it is not configured with.
//   - [BreakerWatch]: every relay's re-reading of the open circuit
//     breakers, and the probes and auto-disables due, through the relay's
//     [Breakers] (its probes are delivered by its pipeline).
//
// Each is configured by a struct whose zero fields take the defaults
// named beside it, and reads and writes through the relay's own pool.
package maintenance
