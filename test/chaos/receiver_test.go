package chaos_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
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
	errors500 float64 // answered 500
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
	seq int64 // global arrival order
	at  time.Time
}

// receiver is the webhook endpoint of the chaos test. It verifies every
// signature, answers poisoned messages with 400 or 410, injects faults, and
// records each processed webhook-id with its arrival.
type receiver struct {
	secret string
	faults faults

	seq          atomic.Int64
	badSignature atomic.Int64
	slow         atomic.Int64 // processed messages answered after the lease
	count500     atomic.Int64
	timeouts     atomic.Int64
	count429     atomic.Int64
	poisoned     atomic.Int64

	mu       sync.Mutex
	rng      *rand.Rand
	last429  time.Time
	accepted map[string][]arrival // webhook-id -> processed arrivals
	seen     map[string]bool      // every webhook-id that reached us
}

func newReceiver(secret string, f faults) *receiver {
	return &receiver{
		secret: secret, faults: f,
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		accepted: map[string][]arrival{},
		seen:     map[string]bool{},
	}
}

type chaosPayload struct {
	Key    string `json:"k"`
	Poison bool   `json:"poison"`
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	id := r.Header.Get("webhook-id")
	var p chaosPayload
	if err := json.Unmarshal(body, &p); err != nil || p.Key != id {
		rc.badSignature.Add(1) // signed, yet not what was enqueued
		http.Error(w, "payload does not match webhook-id", http.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	rc.seen[id] = true
	roll := rc.rng.Float64()
	rateLimit := !p.Poison && rc.faults.every429 > 0 && now.Sub(rc.last429) >= rc.faults.every429
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
	case rateLimit:
		rc.count429.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case roll < f.errors500:
		rc.count500.Add(1)
		http.Error(w, "injected failure", http.StatusInternalServerError)
	case roll < f.errors500+f.timeouts:
		rc.timeouts.Add(1)
		rc.hold(r)
		http.Error(w, "too late", http.StatusInternalServerError)
	case roll < f.errors500+f.timeouts+f.slow:
		rc.slow.Add(1)
		rc.accept(id, now)
		rc.hold(r)
		w.WriteHeader(http.StatusNoContent)
	default:
		rc.accept(id, now)
		w.WriteHeader(http.StatusNoContent)
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

func (rc *receiver) accept(id string, at time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.accepted[id] = append(rc.accepted[id], arrival{seq: rc.seq.Add(1), at: at})
}

// snapshot returns copies of the accepted and seen maps.
func (rc *receiver) snapshot() (map[string][]arrival, map[string]bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	acc := make(map[string][]arrival, len(rc.accepted))
	for k, v := range rc.accepted {
		acc[k] = append([]arrival(nil), v...)
	}
	seen := make(map[string]bool, len(rc.seen))
	for k := range rc.seen {
		seen[k] = true
	}
	return acc, seen
}
