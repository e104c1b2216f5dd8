package relay

import (
	"context"
	"sync"
	"time"
)

// TenantShare bounds the slots the rate keys of one tenant may hold
// together on a relay, beside each key's own share (keyShareOfSlots). A
// per-key sink whose keys belong to tenants (a destinations sink: one key
// per destination) would otherwise let one tenant with many slow keys
// fill every slot: 8 endpoints answering after 8 s held all of
// relay.concurrency 16, and another tenant's deliveries waited 30 s. Rows
// of a tenant at its share are handled as those of a key at its share:
// the loop does not claim them again until one of its deliveries ends
// (see keyedClaims). It is the engine's hook, set by the serving process
// for the sinks that deliver to destinations, not a part of the sink
// contract.
type TenantShare struct {
	// Of names the tenant of a rate key of the sink; "" leaves the key
	// bounded by its own share only. It is asked once per key and claim,
	// and must answer from memory (a lookup, not a query per call).
	Of func(ctx context.Context, key string) string
	// Share is the part of the sink's MaxInFlight one tenant's keys may
	// hold together, above 0 and at most 1.
	Share float64
}

// tenantSlotsOf marks the counts of tenants in keysInFlight, kept apart
// from the counts of the sink's rate keys.
const tenantSlotsOf = "\x00tenants of "

// slots is how many deliveries of one tenant s may have under way on a
// relay.
func (t *TenantShare) slots(s SinkConfig) int {
	return max(1, int(float64(s.MaxInFlight)*t.Share))
}

// tenantOf asks for key's tenant, turning a panic into no tenant, as
// keyRateLimit does.
func (t *TenantShare) tenantOf(ctx context.Context, key string) (tenant string) {
	defer func() {
		if recover() != nil {
			tenant = ""
		}
	}()
	return t.Of(ctx, key)
}

// tenantKeyRoom is a sink's share of the slots per key, each key bounded
// also by its tenant's share.
type tenantKeyRoom struct {
	keys, tenants sinkKeyRoom
	tenantOf      map[string]string // the tenant of each key of a claim
}

func (k tenantKeyRoom) take(key string, want int) int {
	got := k.keys.take(key, want)
	t := k.tenantOf[key]
	if t == "" || got == 0 {
		return got
	}
	ok := k.tenants.take(t, got)
	for range got - ok {
		k.keys.give(key)
	}
	return ok
}

func (k tenantKeyRoom) give(key string) {
	k.keys.give(key)
	if t := k.tenantOf[key]; t != "" {
		k.tenants.give(t)
	}
}

func (k tenantKeyRoom) left(key string) int {
	left := k.keys.left(key)
	if t := k.tenantOf[key]; t != "" {
		left = min(left, k.tenants.left(t))
	}
	return left
}

// keyRoomOf is the room of keys, the rate keys of a claim of s: each key's
// share of the slots and, when s shares its slots among tenants, its
// tenant's.
func (r *Relay) keyRoomOf(ctx context.Context, s SinkConfig, keys []string) keyRoom {
	room := sinkKeyRoom{flight: &r.keyFlight, sink: s.Name, most: keySlots(s)}
	share := s.TenantShare
	if share == nil {
		return room
	}
	tenantOf := map[string]string{}
	for _, key := range keys {
		if _, seen := tenantOf[key]; !seen {
			tenantOf[key] = share.tenantOf(ctx, key)
		}
	}
	tenants := sinkKeyRoom{flight: &r.keyFlight, sink: tenantSlotsOf + s.Name, most: share.slots(s)}
	return tenantKeyRoom{keys: room, tenants: tenants, tenantOf: tenantOf}
}

// tenantPace hands the rows of a tenant at its share of the slots back
// spread over the tenant's coming slots, one every mean delivery time of
// the tenant divided by its slots, after the last it handed back: a row
// handed back due in a second, like every other of its tenant, would come
// back with them every second and be handed back again (a noisy tenant's
// backlog claimed and handed back over and over, issue 40 item 5), and the
// other tenants' rows behind that backlog would wait for the loop to claim
// its way through it each time. Spread, each row of the backlog is claimed
// about once, when a slot of its tenant may be free, and the loop claims
// on at once to reach the rows behind it (see keyedClaims.observe).
type tenantPace struct {
	spread *keySpread // per tenant; a pointer, as keySpread holds a tenantPace
	mu     sync.Mutex
	took   map[string]time.Duration // mean delivery time per tenant (moving)
}

// tenantPaceWeight is the weight of a delivery's time in its tenant's
// moving mean: the mean follows a change in a few deliveries.
const tenantPaceWeight = 0.25

// timed returns done, to be called when a delivery of key started now
// ends, that also learns how long the delivery took for key's tenant.
func (p *tenantPace) timed(room keyRoom, key string, done func()) func() {
	t, ok := room.(tenantKeyRoom)
	tenant := t.tenantOf[key]
	if !ok || tenant == "" {
		return done
	}
	began := time.Now()
	return func() {
		took := time.Since(began)
		p.mu.Lock()
		if p.took == nil {
			p.took = map[string]time.Duration{}
		}
		if mean, seen := p.took[tenant]; seen {
			took = mean + time.Duration(tenantPaceWeight*float64(took-mean))
		}
		p.took[tenant] = took
		p.mu.Unlock()
		done()
	}
}

// after is when to hand back a row of key due from now at the earliest,
// and true, when key's tenant holds its share of the slots; false
// otherwise (the row goes back as due says). Before a delivery of the
// tenant has ended, its rows are spread keyFullRecheck apart.
func (p *tenantPace) after(room keyRoom, key string, due time.Duration) (time.Duration, bool) {
	t, ok := room.(tenantKeyRoom)
	tenant := t.tenantOf[key]
	if !ok || tenant == "" || t.tenants.left(tenant) > 0 {
		return due, false
	}
	p.mu.Lock()
	every, seen := p.took[tenant]
	p.mu.Unlock()
	if every = every / time.Duration(t.tenants.most); !seen || every <= 0 {
		every = keyFullRecheck
	}
	if p.spread == nil {
		p.spread = &keySpread{}
	}
	return p.spread.after(tenant, due, every), true
}
