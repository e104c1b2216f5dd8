package maintenance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

const (
	// deliveryMinutesRetention is how long maintenance keeps the
	// per-minute delivery counts: longer than any rate window asked for.
	deliveryMinutesRetention = time.Hour
	// flushTimeout bounds one flush of the delivery counts.
	flushTimeout = 10 * time.Second
	// destinationMinutesRetention is how long maintenance keeps the
	// per-destination counts (migration 033): the day a tenant's portal
	// shows figures for, and an hour more so the oldest minute of that
	// day is never pruned from under a reader.
	destinationMinutesRetention = 25 * time.Hour
	// DestinationHeader is the row header naming the tenant's destination
	// a row is for (destinations.Header, set by publish's fan-out and
	// enqueue_destination(), migration 016): its deliveries are counted
	// per destination too.
	DestinationHeader = "outboxd-destination"
)

// DeliveryMinutes counts every relay's deliveries by sink and adds them to
// delivery_minutes every interval, in one statement; the console's rates
// and latency percentiles come from them, not from the rows, which they
// outlive. Deliveries to a tenant's destination are counted per
// destination too, into destination_minutes in the same flush (one
// statement more per flush when there were any, none per delivery): the
// figures of the tenant's portal. Stop flushes once more, so call it
// after the relay's last outcome was written.
type DeliveryMinutes struct {
	runner
	env      Env
	interval time.Duration
	tallies  map[string]*tally
	// destinations are the tallies by destination id, made on a
	// destination's first delivery since the last flush, which drops
	// them: a relay holds tallies only for the destinations it delivered
	// to lately.
	destMu       sync.Mutex
	destinations map[string]*tally
}

// tally counts one sink's delivery outcomes since the last flush.
// Deliveries record into it without a lock; a flush swaps the counts out.
type tally struct {
	sent, retried, dead atomic.Int64
	latency             []atomic.Int64 // sent deliveries by latency bucket
}

// NewDeliveryMinutes returns the counts of sinks' deliveries, flushed
// every interval (the relay's StatsInterval).
func NewDeliveryMinutes(env Env, sinks []string, interval time.Duration) *DeliveryMinutes {
	m := &DeliveryMinutes{env: env, interval: interval, tallies: make(map[string]*tally, len(sinks)), destinations: map[string]*tally{}}
	for _, s := range sinks {
		m.tallies[s] = newTally()
	}
	return m
}

func newTally() *tally { return &tally{latency: make([]atomic.Int64, store.LatencyBuckets)} }

// Record counts one delivery to sink whose outcome, written, left its
// row in outcome, elapsed after it started: sent, failed (a retry) or
// dead. Other outcomes (a row put off by a Retry-After) are not
// deliveries of their own and are left out, as are sinks it was not made
// with. A row for a tenant's destination (destination, its
// DestinationHeader; "" for none) is counted for that destination too.
func (m *DeliveryMinutes) Record(sink, destination string, outcome status.Row, elapsed time.Duration) {
	t := m.tallies[sink]
	if t == nil {
		return
	}
	t.record(outcome, elapsed)
	if destination != "" {
		m.destMu.Lock()
		d := m.destinations[destination]
		if d == nil {
			d = newTally()
			m.destinations[destination] = d
		}
		m.destMu.Unlock()
		d.record(outcome, elapsed)
	}
}

// record counts one delivery whose row was left in outcome after elapsed.
func (t *tally) record(outcome status.Row, elapsed time.Duration) {
	switch outcome {
	case status.Sent:
		t.sent.Add(1)
		t.latency[sort.SearchFloat64s(store.LatencySecondsBuckets, elapsed.Seconds())].Add(1)
	case status.Failed:
		t.retried.Add(1)
	case status.Dead:
		t.dead.Add(1)
	}
}

// Start flushes every interval until ctx ends or Stop, and once more then
// (the drain's outcomes included). A flush is not cut short by the end
// (flushTimeout bounds it): the counts it swapped out would be lost.
func (m *DeliveryMinutes) Start(ctx context.Context) {
	m.start(ctx, func(ctx context.Context) {
		t := time.NewTicker(m.interval)
		defer t.Stop()
		for stopping := false; !stopping; {
			select {
			case <-t.C:
			case <-ctx.Done():
				stopping = true
			}
			if err := m.flush(context.WithoutCancel(ctx)); err != nil {
				m.env.Logger.Warn("outbox: could not record delivery counts", "error", err)
			}
		}
	})
}

// flush adds the counts since the last flush to delivery_minutes, and
// the destinations' to destination_minutes.
func (m *DeliveryMinutes) flush(ctx context.Context) error {
	sinks := swapCounts(m.tallies)
	m.destMu.Lock()
	dests := m.destinations
	m.destinations = map[string]*tally{}
	m.destMu.Unlock()
	// A delivery recording into a tally just swapped out (it looked the
	// tally up before the swap) is counted in this flush or lost with
	// it: a figure off by one, never a delivery held up.
	perDest := swapCounts(dests)
	if len(sinks.names) == 0 && len(perDest.names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	// The counts of a flush that fails are lost: they only feed the
	// console's rates and the portal's figures, and holding them back
	// could grow without bound while the database is away.
	if len(sinks.names) > 0 {
		err := m.env.Q.AddDeliveryMinutes(ctx, m.env.DB, store.AddDeliveryMinutesParams{Sinks: sinks.names, Sent: sinks.sent,
			Retried: sinks.retried, Dead: sinks.dead, Latency: sinks.latency, Buckets: int64(store.LatencyBuckets)})
		if err != nil {
			return fmt.Errorf("add to delivery_minutes: %w", err)
		}
	}
	if len(perDest.names) > 0 {
		err := m.env.Q.AddDestinationMinutes(ctx, m.env.DB, store.AddDestinationMinutesParams{Destinations: perDest.names,
			Sent: perDest.sent, Retried: perDest.retried, Dead: perDest.dead, Latency: perDest.latency, Buckets: int64(store.LatencyBuckets)})
		if err != nil {
			return fmt.Errorf("add to destination_minutes: %w", err)
		}
	}
	return nil
}

// counts are the counts of some tallies, as a flush writes them: one
// entry per name (sorted), the latency buckets of every name one after
// the other.
type counts struct {
	names               []string
	sent, retried, dead []int64
	latency             []int64
}

// swapCounts takes the counts out of tallies, leaving them at zero, and
// returns those of the names that counted something.
func swapCounts(tallies map[string]*tally) counts {
	var c counts
	for _, name := range slices.Sorted(maps.Keys(tallies)) {
		t := tallies[name]
		s, re, d := t.sent.Swap(0), t.retried.Swap(0), t.dead.Swap(0)
		if s == 0 && re == 0 && d == 0 {
			continue
		}
		c.names = append(c.names, name)
		c.sent, c.retried, c.dead = append(c.sent, s), append(c.retried, re), append(c.dead, d)
		for i := range t.latency {
			c.latency = append(c.latency, t.latency[i].Swap(0))
		}
	}
	return c
}
