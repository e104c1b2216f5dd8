package relay

import (
	"sync"
	"time"
)

// keyShareOfSlots is the part of a per-key sink's in-flight slots
// (MaxInFlight) one rate key may hold on a relay. A receiver that hangs
// until its timeout would otherwise fill them all before its breaker
// opens (a key limited to 10 deliveries a second with a 10 s timeout
// holds up to 100), and every other key of the sink (for a destinations
// sink, every other tenant) would wait behind it. An eighth of the default
// 64 slots is 8: a healthy receiver answering in a second still takes 8
// deliveries a second.
const keyShareOfSlots = 1.0 / 8

// keyFullRecheck is how soon a row handed back because its key held its
// share of the slots comes due again.
const keyFullRecheck = time.Second

// keysInFlight counts each rate key's deliveries under way on this
// relay, by sink.
type keysInFlight struct {
	mu sync.Mutex
	n  map[keyOfSink]int
}

type keyOfSink struct{ sink, key string }

// take reserves up to want of the most slots of (sink, key) and returns
// how many it got.
func (k *keysInFlight) take(sink, key string, want, most int) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n = map[keyOfSink]int{}
	}
	id := keyOfSink{sink, key}
	got := max(0, min(want, most-k.n[id]))
	k.n[id] += got
	return got
}

// give returns one slot of (sink, key).
func (k *keysInFlight) give(sink, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	id := keyOfSink{sink, key}
	if k.n[id] <= 1 {
		delete(k.n, id)
		return
	}
	k.n[id]--
}

// left is how many more of the most slots (sink, key) may take (0: it
// holds its share).
func (k *keysInFlight) left(sink, key string, most int) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return max(0, most-k.n[keyOfSink{sink, key}])
}

// keySlots is how many deliveries one key of s may have under way on a
// relay.
func keySlots(s SinkConfig) int {
	return max(1, int(float64(s.MaxInFlight)*keyShareOfSlots))
}
