package status

// Row is a row's place in its life cycle, as the status column of
// messages and messages_history stores it.
type Row string

// The statuses a row moves through: pending until a relay claims it,
// in_progress while one delivers it, then sent, failed (to be retried
// after its backoff) or dead (until an operator redrives or purges it).
const (
	Pending    Row = "pending"
	InProgress Row = "in_progress"
	Sent       Row = "sent"
	Failed     Row = "failed"
	Dead       Row = "dead"
)

// Rows returns every row status in life-cycle order, for listing and
// checking them (an API's filter, a console's menu).
func Rows() []Row { return []Row{Pending, InProgress, Failed, Sent, Dead} }

// Breaker is a circuit breaker's state. A receiver without an open
// breaker is closed; an open one gets one probe per probe interval, and is
// probing while a relay delivers that probe.
type Breaker string

// The states of a circuit breaker.
const (
	BreakerClosed  Breaker = "closed"
	BreakerOpen    Breaker = "open"
	BreakerProbing Breaker = "probing"
)

// Gauge is b as the outbox.sink.circuit_state gauge reports it: 0
// closed, 1 open, 2 probing, so that the larger of two states is the
// more open one.
func (b Breaker) Gauge() int64 {
	switch b {
	case BreakerOpen:
		return 1
	case BreakerProbing:
		return 2
	default:
		return 0
	}
}

// Event types a circuit breaker's change publishes through the outbox's
// own routes. Opened and closed keep "destination" in their names for
// compatibility: it means a receiver (a sink, or one rate key of a sink
// limited per key). Disabled is about a tenant's destination that the
// relay disabled because its breaker stayed open too long.
const (
	EventDestinationOpened   = "outboxd.destination.opened"
	EventDestinationClosed   = "outboxd.destination.closed"
	EventDestinationDisabled = "outboxd.destination.disabled"
)

// Event types a tenant's destination may subscribe to about the tenant's
// own endpoints (with EventDestinationDisabled): its breaker opened
// (failing) or closed (recovered). Sent to the tenant's destinations
// only, never through the routes.
const (
	EventDestinationFailing   = "outboxd.destination.failing"
	EventDestinationRecovered = "outboxd.destination.recovered"
)

// A tenant's destination's health as its tenant reads it (the portal, the
// API's health.state, the data of the operational events).
const (
	// HealthHealthy: deliveries go out.
	HealthHealthy = "healthy"
	// HealthFailing: its circuit breaker is open: outboxd stopped
	// delivering and tries it from time to time.
	HealthFailing = "failing"
	// HealthPaused: its receiver's Retry-After holds its deliveries.
	HealthPaused = "paused"
	// HealthDisabled: it is disabled, by its tenant, an operator, or
	// outboxd after it failed too long.
	HealthDisabled = "disabled"
)

// AutoDisabledForTenant is why outboxd disabled a destination whose
// breaker stayed open too long, in its tenant's words (no setting of the
// operator's named).
const AutoDisabledForTenant = "outboxd disabled it because its deliveries kept failing"
