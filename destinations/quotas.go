package destinations

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// Quotas bound what one tenant may ask of outboxd. A tenant is an
// outsider acting through the portal (or through an operator's script):
// without them one tenant's 2,000 endpoints turned each of its events into
// 2,000 signed requests to hosts of its choosing, and its test events
// filled every relay's delivery slots. The Store enforces them in the
// transaction of the change, under a lock of the tenant, so the API, the
// console, the portal and the command line refuse alike and concurrent
// requests cannot pass them together.
type Quotas struct {
	// EndpointsPerTenant is the most destinations one tenant may have.
	EndpointsPerTenant int
	// TestEventsPerMinute is the most test events one tenant may send
	// within any minute.
	TestEventsPerMinute int
	// TenantShareOfSlots is the part of a destinations sink's delivery
	// slots on a relay (its max_in_flight, by default relay.concurrency)
	// that one tenant's deliveries may hold together; the relay enforces
	// it (see Directory.TenantOf).
	TenantShareOfSlots float64
}

// Defaults of Quotas.
const (
	// DefaultEndpointsPerTenant: a customer's integrations (a few
	// environments, a few teams, each an endpoint or two) fit in far
	// fewer; at 100 one event is at most 100 requests, which the relays
	// absorb, where the 2,000 a script made in seconds were not.
	DefaultEndpointsPerTenant = 100
	// DefaultTestEventsPerMinute: a person trying an endpoint clicks "Send
	// a test event" a few times a minute; 10 lets them, while a loop
	// sending test events to keep the relays busy is stopped within
	// seconds.
	DefaultTestEventsPerMinute = 10
	// DefaultTenantShareOfSlots: each destination may hold an eighth of
	// the slots already, so a tenant with 8 slow endpoints (each answering
	// after 8 s) held all of relay.concurrency 16 and another tenant's
	// deliveries waited 30 s instead of 0.1. At a quarter, three tenants
	// whose endpoints hang leave a quarter of the slots to every other
	// tenant, and one busy tenant still has 16 of the default 64: two
	// destinations at their full share.
	DefaultTenantShareOfSlots = 0.25
	// testEventWindow is the window TestEventsPerMinute counts in.
	testEventWindow = time.Minute
)

// The quotas' keys in plugins.yaml (its destinations.quotas block,
// declared by package config), which a QuotaError names so the reader
// knows what to raise.
const (
	KeyEndpointsPerTenant  = "destinations.quotas.endpoints_per_tenant"
	KeyTestEventsPerMinute = "destinations.quotas.test_events_per_minute"
	KeyTenantShareOfSlots  = "destinations.quotas.tenant_share_of_slots"
)

// DefaultQuotas returns the quotas a Store enforces unless WithQuotas
// sets others.
func DefaultQuotas() Quotas {
	return Quotas{EndpointsPerTenant: DefaultEndpointsPerTenant, TestEventsPerMinute: DefaultTestEventsPerMinute,
		TenantShareOfSlots: DefaultTenantShareOfSlots}
}

// QuotaError is a request refused by one of a tenant's quotas: a count
// (Rate false: the tenant has Limit destinations already; delete one
// first) or a rate (Rate true: Limit test events within the last minute;
// the next is accepted after RetryAfter).
type QuotaError struct {
	Tenant     string
	Key        string // the quota's key in plugins.yaml
	Limit      int
	Rate       bool
	RetryAfter time.Duration
}

// HTTPStatus is the status the API, the console and the portal answer a
// refusal with: 429 Too Many Requests for a rate (with Retry-After), 422
// for a count, as for any value the API refuses.
func (e *QuotaError) HTTPStatus() int {
	if e.Rate {
		return http.StatusTooManyRequests
	}
	return http.StatusUnprocessableEntity
}

// RetryAfterHeader sets the Retry-After header of a rate's refusal on h.
func (e *QuotaError) RetryAfterHeader(h http.Header) {
	if e.Rate {
		h.Set("Retry-After", strconv.Itoa(int(e.RetryAfter/time.Second)))
	}
}

func (e *QuotaError) Error() string {
	if e.Rate {
		return fmt.Sprintf("tenant %s sent %d test events within the last minute, its quota (%s: %d); try again in %s",
			e.Tenant, e.Limit, e.Key, e.Limit, e.RetryAfter)
	}
	return fmt.Sprintf("tenant %s has %d destinations, its quota (%s: %d); delete one before creating another",
		e.Tenant, e.Limit, e.Key, e.Limit)
}

// WithQuotas returns a Store like s that enforces q, each at least 1
// (package config checks plugins.yaml's).
func (s *Store) WithQuotas(q Quotas) *Store {
	d := *s.door.Load()
	d.quotas = q
	return s.withDoor(d)
}

// quotaUse takes tenant's quota lock for the rest of tx and then reads,
// in a statement of its own, what the tenant uses: under READ COMMITTED
// that statement sees what the lock's previous holder committed, so two
// requests of one tenant count one after the other.
func (s *Store) quotaUse(ctx context.Context, tx pgx.Tx, tenant string) (store.DestinationQuotaUseRow, error) {
	if err := s.q.LockTransaction(ctx, tx, store.AdvisoryLockNamespace, s.q.Schema+"/tenant/"+tenant, store.LockKeyTenantQuota); err != nil {
		return store.DestinationQuotaUseRow{}, fmt.Errorf("destinations: lock the quotas of tenant %s: %w", tenant, err)
	}
	use, err := s.q.DestinationQuotaUse(ctx, tx, tenant, audit.ActionDestinationTestEvent, testEventWindow)
	if err != nil {
		return use, fmt.Errorf("destinations: read the quotas of tenant %s: %w", tenant, err)
	}
	return use, nil
}

// checkEndpoints refuses a new destination of tenant beyond its quota.
func (s *Store) checkEndpoints(ctx context.Context, tx pgx.Tx, tenant string) error {
	use, err := s.quotaUse(ctx, tx, tenant)
	if err != nil {
		return err
	}
	if limit := s.door.Load().quotas.EndpointsPerTenant; use.Destinations >= limit {
		return &QuotaError{Tenant: tenant, Key: KeyEndpointsPerTenant, Limit: limit}
	}
	return nil
}

// checkTestEvents refuses a test event of tenant beyond its quota at now,
// saying when the oldest test event in the window leaves it.
func (s *Store) checkTestEvents(ctx context.Context, tx pgx.Tx, tenant string, now time.Time) error {
	use, err := s.quotaUse(ctx, tx, tenant)
	if err != nil {
		return err
	}
	limit := s.door.Load().quotas.TestEventsPerMinute
	if use.Recent < limit {
		return nil
	}
	wait := testEventWindow
	if use.OldestRecent != nil {
		// Whole seconds, at least one: what a Retry-After header says.
		wait = min(max(use.OldestRecent.Add(testEventWindow).Sub(now).Round(time.Second), time.Second), testEventWindow)
	}
	return &QuotaError{Tenant: tenant, Key: KeyTestEventsPerMinute, Limit: limit, Rate: true, RetryAfter: wait}
}
