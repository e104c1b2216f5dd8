package main

import "time"

// sizes are the counts and durations of one benchmark mode. full is what the
// issue specifies; quick is a smoke test for CI that only proves the code
// still runs end to end.
type sizes struct {
	runs int

	burnDown        int // messages per burn-down (outboxd, River tuned)
	burnDownDefault int // River with its defaults works ~1k jobs/s per client: fewer rows, same rate

	latencyMessages int
	latencyGap      time.Duration
	// latencyLoadDuration is how long producers write at each rate of the
	// latency-load scenario.
	latencyLoadDuration time.Duration

	// costMessages is the burn-down of the cost scenario; under callgrind
	// it and twice as many.
	costMessages int

	enqueueSingle1 int // single-message transactions on 1 connection
	enqueueSingle8 int // ... spread over 8 connections
	enqueueBatches int // transactions of enqueueBatchSize messages

	steadyDuration  time.Duration
	steadyWindow    time.Duration // claim time is the median of the first and the last window
	steadyRate      int           // messages per second across steadyProducers
	steadyFullRuns  int           // runs of outboxd and River tuned
	steadyOtherRuns int           // runs of River defaults (60 s each; not the comparison target)

	historyRows        int // delivered rows in the "history" table
	historyPending     int // rows burnt down while claim time is measured
	historyPendingSlow int // the same for River defaults

	brokerMessages int // messages per broker measurement

	eventsSingle  int // events published one per transaction, per mode
	eventsBatches int // batches of eventsBatchSize events, per mode

	idleSettle time.Duration
	idleWindow time.Duration

	// Pressure scenarios and the stepped load: phase is the length of
	// each phase (clean, pressure, recovery) and of each step;
	// pressureRate the clean load (msg/s) of the pressure scenarios,
	// pressureRelays how many relays per system deliver it;
	// capacityBacklog the burn-down that measures the relays' capacity.
	phase           time.Duration
	pressureRuns    int // runs of the pressure, stepped and claims-waiting scenarios
	pressureRate    int
	pressureRelays  int
	capacityBacklog int

	waitingRows    int // rows of the paused and of the unconfigured sink beside the measured one
	waitingPending int // fresh rows of the measured sink burnt down while claims are timed

	// burndown-beside (issue 42 item 4): rows of the active sink burnt
	// down, and of the paused and of the unconfigured sink beside them.
	besideActive  int
	besideWaiting int

	soakDuration  time.Duration
	soakRate      int
	soakRetention time.Duration

	// The destinations scenario (issue 25, item 9): tenants of the large
	// outbox (10 destinations each) and of the small one; events of each
	// write in the publish cost; events whose rows (3 each) a claim
	// burn-down delivers; the healthy tenants beside the failing one,
	// their publish rate (events/s in all), and the phases' lengths (the
	// timeout phase's outlasts the sink's 10 s timeout).
	destTenants        int
	destTenantsFew     int
	destPublishEvents  int
	destClaimEvents    int
	destHealthyTenants int
	destRate           int
	destPhase          time.Duration
	destHangPhase      time.Duration
	// destBreakerWait bounds the wait, after a failing phase, for every
	// breaker of the failing tenant to open.
	destBreakerWait time.Duration

	// drain bounds any wait for deliveries, so a relay that stopped
	// delivering fails the scenario instead of hanging the run.
	drain time.Duration
}

// Fixed shapes shared by both modes.
const (
	enqueueBatchSize  = 1000
	enqueueConns      = 8
	steadyProducers   = 4
	steadyRelays      = 2
	latencyRelays     = 2
	enqueueChunk      = 1000 // rows per transaction when preparing a backlog
	riverTunedWorkers = 500
	// riverDefaultWorkers is the MaxWorkers of the untuned client: River
	// requires a value and its documentation's examples use 100.
	riverDefaultWorkers = 100
	riverTunedCooldown  = time.Millisecond
	riverTunedPoll      = 100 * time.Millisecond
)

var fullSizes = sizes{
	runs:                3,
	burnDown:            100_000,
	brokerMessages:      20_000,
	eventsSingle:        3000,
	eventsBatches:       100,
	burnDownDefault:     10_000,
	latencyMessages:     2000,
	latencyGap:          2 * time.Millisecond,
	latencyLoadDuration: 10 * time.Second,
	costMessages:        2000,
	enqueueSingle1:      3000,
	enqueueSingle8:      16_000,
	enqueueBatches:      200,
	steadyDuration:      60 * time.Second,
	steadyWindow:        10 * time.Second,
	steadyRate:          1000,
	steadyFullRuns:      3,
	steadyOtherRuns:     1,
	historyRows:         1_000_000,
	historyPending:      20_000,
	historyPendingSlow:  5000,
	idleSettle:          2 * time.Second,
	idleWindow:          10 * time.Second,
	drain:               5 * time.Minute,
	phase:               30 * time.Second,
	pressureRuns:        1,
	pressureRate:        2000,
	pressureRelays:      steadyRelays,
	capacityBacklog:     100_000,
	waitingRows:         1_000_000,
	waitingPending:      20_000,
	besideActive:        100_000,
	besideWaiting:       150_000,
	soakDuration:        30 * time.Minute,
	soakRate:            5000,
	soakRetention:       5 * time.Minute,
	destTenants:         1000,
	destTenantsFew:      10,
	destPublishEvents:   1000,
	destClaimEvents:     3000,
	destHealthyTenants:  100,
	destRate:            100,
	destPhase:           15 * time.Second,
	destHangPhase:       25 * time.Second,
	destBreakerWait:     30 * time.Second,
}

var quickSizes = sizes{
	runs:                1,
	burnDown:            3000,
	brokerMessages:      500,
	eventsSingle:        100,
	eventsBatches:       3,
	burnDownDefault:     500,
	latencyMessages:     100,
	latencyGap:          2 * time.Millisecond,
	latencyLoadDuration: time.Second,
	costMessages:        300,
	enqueueSingle1:      100,
	enqueueSingle8:      400,
	enqueueBatches:      3,
	steadyDuration:      3 * time.Second,
	steadyWindow:        time.Second,
	steadyRate:          200,
	steadyFullRuns:      1,
	steadyOtherRuns:     1,
	historyRows:         20_000,
	historyPending:      1000,
	historyPendingSlow:  300,
	idleSettle:          500 * time.Millisecond,
	idleWindow:          2 * time.Second,
	drain:               time.Minute,
	phase:               time.Second,
	pressureRuns:        1,
	pressureRate:        300,
	pressureRelays:      steadyRelays,
	capacityBacklog:     3000,
	waitingRows:         5000,
	waitingPending:      500,
	besideActive:        2000,
	besideWaiting:       5000,
	soakDuration:        3 * time.Second,
	soakRate:            300,
	soakRetention:       time.Second,
	destTenants:         30,
	destTenantsFew:      2,
	destPublishEvents:   100,
	destClaimEvents:     200,
	destHealthyTenants:  5,
	destRate:            40,
	destPhase:           2 * time.Second,
	destHangPhase:       3 * time.Second,
	destBreakerWait:     15 * time.Second,
}
