// Package fairshare bounds how much of a claim loop's concurrency one sink
// may hold, so a sink that hangs leaves the rest to the others.
package fairshare

import (
	"slices"
	"sync"
	"time"
)

// Shares bounds each key's (each sink's) concurrent holders. Items of a key
// that holds all of its shares wait in a FIFO queue of their own; the holder
// that finishes with a share hands it to the next queued item. (A goroutine
// per waiting row instead cost the relay ~15% of its CPU in a burn-down:
// creating, parking and scanning a thousand goroutines per claim.)
type Shares[T any] struct {
	size       int
	stallAfter time.Duration

	mu       sync.Mutex
	keys     map[string]*share[T]
	dequeued chan struct{} // a value after a queued item got its share
}

type share[T any] struct {
	active   int       // holders of a share
	queue    []T       // items waiting for a share, in arrival order
	lastDone time.Time // when a holder last finished
}

// New allows each key size concurrent holders. A key that holds all of
// them and has not finished one for stallAfter counts as stalled.
func New[T any](size int, stallAfter time.Duration) *Shares[T] {
	return &Shares[T]{size: max(1, size), stallAfter: stallAfter, keys: map[string]*share[T]{},
		dequeued: make(chan struct{}, 1)}
}

func (s *Shares[T]) of(key string) *share[T] {
	sh, ok := s.keys[key]
	if !ok {
		sh = &share[T]{}
		s.keys[key] = sh
	}
	return sh
}

// AcquireOrQueue takes a share of key for item and reports true, or queues
// item (and reports false) when key holds all of its shares.
func (s *Shares[T]) AcquireOrQueue(key string, item T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.of(key)
	if sh.active < s.size {
		sh.active++
		return true
	}
	sh.queue = append(sh.queue, item)
	return false
}

// HandOver is called by the holder of one of key's shares when it is done
// with it: it returns the next queued item, which inherits the share, or
// gives the share back and reports false.
func (s *Shares[T]) HandOver(key string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.of(key)
	sh.lastDone = time.Now()
	var next T
	if len(sh.queue) == 0 {
		sh.active--
		return next, false
	}
	next = sh.queue[0]
	var zero T
	sh.queue[0] = zero // let the finished item be collected
	sh.queue = sh.queue[1:]
	select {
	case s.dequeued <- struct{}{}:
	default:
	}
	return next, true
}

// Queued counts the items waiting for a share, but for the keys in skip.
func (s *Shares[T]) Queued(skip []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for key, sh := range s.keys {
		if !slices.Contains(skip, key) {
			n += len(sh.queue)
		}
	}
	return n
}

// Dequeued receives a value after a queued item got its share (at most one
// pending): the queues got shorter.
func (s *Shares[T]) Dequeued() <-chan struct{} { return s.dequeued }

// Stalled lists the keys that use all of their shares and have not
// finished one for stallAfter (they hang): handing them more items now
// would only make the items wait. A busy but fast key also uses all of its
// shares, but keeps finishing, so it is not listed.
func (s *Shares[T]) Stalled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, sh := range s.keys {
		if sh.active == s.size && time.Since(sh.lastDone) > s.stallAfter {
			out = append(out, key)
		}
	}
	return out
}
