package chaos_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// timestampTolerance is how far webhook-timestamp may be from the
// receiver's clock, as the Standard Webhooks specification recommends.
const timestampTolerance = 5 * time.Minute

// verifySignature checks a Standard Webhooks request the way a receiver
// following the specification does: the secret is "whsec_" + base64(key),
// the signed content is "<webhook-id>.<webhook-timestamp>.<body>", and
// webhook-signature holds space-separated "v1,<base64 HMAC-SHA256>"
// entries, any one of which may match.
func verifySignature(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return errors.New("bad secret")
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not Unix seconds")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > timestampTolerance || d < -timestampTolerance {
		return errors.New("webhook-timestamp outside the tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(sigs) {
		version, encoded, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// faults are the receiver's misbehaviours, as shares of the requests for
// messages that are not poisoned.
type faults struct {
	errors500 float64 // answered 500, a quarter of them 408 (retryable too)
	timeouts  float64 // held past the sink's timeout, not processed
	slow      float64 // processed, then answered after the lease ran out
	// every429 answers one request with 429 and Retry-After at most this
	// often (each one pauses the sink cluster-wide).
	every429   time.Duration
	retryAfter int           // seconds
	hold       time.Duration // how long timeouts and slow responses take
}

// arrival is one request the receiver accepted (processed).
type arrival struct {
	seq   int64 // global arrival order
	at    time.Time
	relay string // the label of the relay that sent it (the URL's path)
}

// receiver is the webhook endpoint of the chaos test. It verifies every
// signature, answers poisoned messages with 400 or 410 and doomed ones with
// 500, injects faults, and records each processed webhook-id with its
// arrival.
type receiver struct {
	secret string
	faults faults

	seq          atomic.Int64
	badSignature atomic.Int64
	wrongID      atomic.Int64 // validly signed, but webhook-id is not the sink's and the body's dedup key
	slow         atomic.Int64 // processed messages answered after the lease
	// late counts processed messages whose relay gave up before the
	// answer was written (a starved machine): delivered again, like slow.
	late     atomic.Int64
	count500 atomic.Int64
	count408 atomic.Int64
	timeouts atomic.Int64
	count429 atomic.Int64
	poisoned atomic.Int64
	doomed   atomic.Int64

	// handling counts each relay's requests being handled, so that the
	// requests of a relay just killed can be waited out.
	handling sync.Map // relay label -> *sync.WaitGroup

	mu       sync.Mutex
	rng      *rand.Rand
	last429  time.Time
	accepted map[string][]arrival // webhook-id -> processed arrivals
	requests map[string][]arrival // webhook-id -> every validly signed request
	// answeredOK holds the webhook-ids answered 2xx at once: their relay
	// learnt of a success (unlike a slow answer, which comes too late).
	answeredOK map[string]bool
}

func newReceiver(secret string, f faults) *receiver {
	return &receiver{
		secret: secret, faults: f,
		rng:        rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		accepted:   map[string][]arrival{},
		requests:   map[string][]arrival{},
		answeredOK: map[string]bool{},
	}
}

type chaosPayload struct {
	Key    string `json:"k"`
	Poison bool   `json:"poison"`
	Doom   bool   `json:"doom"`
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from := strings.TrimPrefix(r.URL.Path, "/") // the sending relay's label
	wg, _ := rc.handling.LoadOrStore(from, &sync.WaitGroup{})
	wg.(*sync.WaitGroup).Add(1)
	defer wg.(*sync.WaitGroup).Done()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the relay gave up (killed, or its deadline passed)
	}
	now := time.Now()
	if err := verifySignature(rc.secret, r.Header, body, now); err != nil {
		rc.badSignature.Add(1)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	// webhook-id is the delivery id, "<sink>/<dedup key>"; the receiver
	// keeps the dedup key.
	id, ok := strings.CutPrefix(r.Header.Get("webhook-id"), sinkName+"/")
	var p chaosPayload
	if err := json.Unmarshal(body, &p); err != nil || !ok || p.Key != id {
		rc.wrongID.Add(1) // signed, yet not what was enqueued
		http.Error(w, "payload does not match webhook-id", http.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	rc.requests[id] = append(rc.requests[id], arrival{at: now, relay: from})
	roll := rc.rng.Float64()
	rateLimit := !p.Poison && !p.Doom && rc.faults.every429 > 0 && now.Sub(rc.last429) >= rc.faults.every429
	if rateLimit {
		rc.last429 = now
	}
	rc.mu.Unlock()

	f := rc.faults
	switch {
	case p.Poison:
		rc.poisoned.Add(1)
		status := http.StatusBadRequest
		if roll < 0.5 {
			status = http.StatusGone
		}
		http.Error(w, "poisoned", status)
	case p.Doom:
		rc.doomed.Add(1)
		http.Error(w, "doomed: this message always fails", http.StatusInternalServerError)
	case rateLimit:
		rc.count429.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case roll < f.errors500/4:
		rc.count408.Add(1)
		http.Error(w, "injected request timeout", http.StatusRequestTimeout)
	case roll < f.errors500:
		rc.count500.Add(1)
		http.Error(w, "injected failure", http.StatusInternalServerError)
	case roll < f.errors500+f.timeouts:
		rc.timeouts.Add(1)
		rc.hold(r)
		http.Error(w, "too late", http.StatusInternalServerError)
	case roll < f.errors500+f.timeouts+f.slow:
		rc.slow.Add(1)
		rc.accept(id, now, from)
		rc.hold(r)
		w.WriteHeader(http.StatusNoContent)
	default:
		rc.accept(id, now, from)
		w.WriteHeader(http.StatusNoContent)
		if r.Context().Err() != nil {
			rc.late.Add(1)
			return
		}
		rc.mu.Lock()
		rc.answeredOK[id] = true
		rc.mu.Unlock()
	}
}

// hold keeps the request for the configured hold time, or until the
// client gives up.
func (rc *receiver) hold(r *http.Request) {
	t := time.NewTimer(rc.faults.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

func (rc *receiver) accept(id string, at time.Time, from string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.accepted[id] = append(rc.accepted[id], arrival{seq: rc.seq.Add(1), at: at, relay: from})
}

// settle waits (up to timeout) until the receiver has finished every
// request of the relay called label, which must send no more (it was
// killed).
func (rc *receiver) settle(label string, timeout time.Duration) {
	wg, ok := rc.handling.Load(label)
	if !ok {
		return
	}
	done := make(chan struct{})
	go func() { wg.(*sync.WaitGroup).Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// acceptedSince returns the webhook-ids accepted at or after since from
// the relay called label, or from any relay when label is "".
func (rc *receiver) acceptedSince(since time.Time, label string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var ids []string
	for id, arrivals := range rc.accepted {
		for _, a := range arrivals {
			if !a.at.Before(since) && (label == "" || a.relay == label) {
				ids = append(ids, id)
				break
			}
		}
	}
	return ids
}

// record is what the receiver saw, per webhook-id.
type record struct {
	accepted   map[string][]arrival // processed requests
	requests   map[string][]arrival // every validly signed request
	answeredOK map[string]bool      // answered 2xx in time
}

// snapshot returns a copy of what the receiver saw.
func (rc *receiver) snapshot() record {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return record{accepted: cloneArrivals(rc.accepted), requests: cloneArrivals(rc.requests), answeredOK: maps.Clone(rc.answeredOK)}
}

func cloneArrivals(m map[string][]arrival) map[string][]arrival {
	out := make(map[string][]arrival, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
