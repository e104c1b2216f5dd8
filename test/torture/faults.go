package torture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FaultKind is how a receiver misbehaves during a window.
type FaultKind string

// The faults of a schedule.
const (
	// FaultDown answers every request 503 without Retry-After: the
	// receiver is down, a signal the breaker counts.
	FaultDown FaultKind = "503"
	// FaultRefuse closes the receiver's listener: connections are refused.
	FaultRefuse FaultKind = "refused"
	// FaultThrottle answers 429 with Window.RetryAfter.
	FaultThrottle FaultKind = "429"
	// FaultSlow answers every request after Window.Delay, processing it.
	FaultSlow FaultKind = "slow"
)

// Window is one fault of a schedule, From to To after the run's start.
type Window struct {
	Kind       FaultKind
	From, To   time.Duration
	RetryAfter time.Duration // FaultThrottle: whole seconds, 0 included
	Delay      time.Duration // FaultSlow
}

// Schedule is a receiver's faults, in time order and not overlapping.
// Outside its windows the receiver answers at once, refusing for good
// (400) only the messages drawn as poisoned.
type Schedule struct {
	Windows []Window
}

// At returns the window in force d after the start, if any.
func (s Schedule) At(d time.Duration) (Window, bool) {
	for _, w := range s.Windows {
		if d >= w.From && d < w.To {
			return w, true
		}
	}
	return Window{}, false
}

// HealedAt is when the last window ends: from then on the receiver takes
// every request.
func (s Schedule) HealedAt() time.Duration {
	var end time.Duration
	for _, w := range s.Windows {
		end = max(end, w.To)
	}
	return end
}

// LongestRetryAfter is the longest Retry-After the schedule answers.
func (s Schedule) LongestRetryAfter() time.Duration {
	var longest time.Duration
	for _, w := range s.Windows {
		if w.Kind == FaultThrottle {
			longest = max(longest, w.RetryAfter)
		}
	}
	return longest
}

func (s Schedule) String() string {
	if len(s.Windows) == 0 {
		return "no faults"
	}
	parts := make([]string, len(s.Windows))
	for i, w := range s.Windows {
		parts[i] = fmt.Sprintf("%s %s..%s", w.Kind, w.From, w.To)
		switch w.Kind {
		case FaultThrottle:
			parts[i] += fmt.Sprintf(" (Retry-After %s)", w.RetryAfter)
		case FaultSlow:
			parts[i] += fmt.Sprintf(" (%s per answer)", w.Delay)
		}
	}
	return strings.Join(parts, ", ")
}

// drawSchedule draws up to three windows within the fault phase: a 503
// window, refused connections, 429 with a Retry-After of 0, a small one
// or one longer than the lease, or slow answers.
func drawSchedule(rng *rand.Rand, lease time.Duration) Schedule {
	var s Schedule
	at := time.Duration(rng.IntN(2000)) * time.Millisecond
	for range rng.IntN(4) {
		length := time.Duration(500+rng.IntN(5000)) * time.Millisecond
		if at+length > faultPhase {
			break
		}
		w := Window{From: at, To: at + length}
		switch rng.IntN(4) {
		case 0:
			w.Kind = FaultDown
		case 1:
			w.Kind = FaultRefuse
		case 2:
			w.Kind = FaultThrottle
			w.RetryAfter = []time.Duration{0, time.Second, 2 * time.Second, lease + time.Second}[rng.IntN(4)]
		default:
			w.Kind, w.Delay = FaultSlow, time.Duration(100+rng.IntN(400))*time.Millisecond
		}
		s.Windows = append(s.Windows, w)
		at = w.To + time.Duration(rng.IntN(3000))*time.Millisecond
	}
	return s
}

// Arrival is one request a receiver got.
type Arrival struct {
	Seq   int64 // arrival order across the receivers
	At    time.Time
	Sink  string
	Relay string // label of the relay that sent it
	// Key is the rate key: the Slack channel, or the sink's name.
	Key string
	// ID is the delivery id: webhook-id, or the sink and dedup key of a
	// Slack post's metadata.
	ID string
	// Members are the dedup keys the request carried: one, or a digest's.
	Members []string
	Status  int
	// RetryAfter is the Retry-After of a 429 answer.
	RetryAfter time.Duration
	// Late is set when the sender had given up before the answer was
	// written: a success it could not learn of (delivered again, like a
	// crash between post and finish).
	Late bool
}

// Accepted reports whether the receiver took the request's members.
func (a Arrival) Accepted() bool { return a.Status/100 == 2 }

// Receiver is one receiver: an HTTP server in the test process on a
// port of its own, whose schedule can refuse connections by closing its
// listener, answering the webhook sinks as a Standard Webhooks endpoint and
// the Slack sinks as chat.postMessage.
type Receiver struct {
	schedule Schedule
	start    time.Time
	seq      *seqCounter

	addr string
	srv  *http.Server

	mu       sync.Mutex
	ln       net.Listener
	arrivals []Arrival
	healed   bool // the schedule's windows are over (or were cut short)
	ts       int
	stopped  chan struct{} // closed by Heal
	// refusalsDone is closed when the refusals are over and the receiver
	// listens for good.
	refusalsDone chan struct{}
}

// seqCounter numbers the arrivals of every receiver of a run.
type seqCounter struct {
	mu sync.Mutex
	n  int64
}

func (c *seqCounter) next() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

// startReceiver listens on a free port, answering every request; Begin
// starts its schedule.
func startReceiver(schedule Schedule, seq *seqCounter) (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receiver: listen: %w", err)
	}
	r := &Receiver{schedule: schedule, start: time.Now().Add(time.Hour), seq: seq, addr: ln.Addr().String(), ln: ln, stopped: make(chan struct{}), refusalsDone: make(chan struct{})}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	// One connection per request, so that closing the listener refuses
	// the next request at once instead of reusing an open connection.
	r.srv.SetKeepAlivesEnabled(false)
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Begin starts the schedule at start: its windows are times after it.
func (r *Receiver) Begin(start time.Time) {
	r.mu.Lock()
	r.start = start
	r.mu.Unlock()
	go r.refusals()
}

// URL is the receiver's base URL.
func (r *Receiver) URL() string { return "http://" + r.addr }

// refusals closes the listener for each FaultRefuse window and listens
// again on the same address when it ends, or at once when the receiver is
// healed. (The timers pace the schedule; they wait for nothing.)
func (r *Receiver) refusals() {
	defer close(r.refusalsDone)
	for _, w := range r.schedule.Windows {
		if w.Kind != FaultRefuse {
			continue
		}
		if !r.waitUntil(w.From) {
			return
		}
		r.mu.Lock()
		_ = r.ln.Close()
		r.mu.Unlock()
		r.waitUntil(w.To)
		r.listenAgain()
	}
}

// waitUntil waits until d after the start; false when the receiver was
// healed first.
func (r *Receiver) waitUntil(d time.Duration) bool {
	t := time.NewTimer(time.Until(r.start.Add(d)))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopped:
		return false
	}
}

// listenAgain opens the receiver's address again after refusals. The
// port was free a moment ago; another process taking it in between is
// retried, as ports of the ephemeral range are rarely reused at once.
func (r *Receiver) listenAgain() {
	for range relistenTries {
		ln, err := net.Listen("tcp", r.addr)
		if err == nil {
			r.mu.Lock()
			r.ln = ln
			r.mu.Unlock()
			go func() { _ = r.srv.Serve(ln) }()
			return
		}
		time.Sleep(relistenPause)
	}
}

// How listenAgain retries a port still in use.
const (
	relistenTries = 50
	relistenPause = 100 * time.Millisecond
)

// Heal ends the schedule: every later request is answered as outside its
// windows, and a refusal in force ends before Heal returns.
func (r *Receiver) Heal() {
	r.mu.Lock()
	if !r.healed {
		r.healed = true
		close(r.stopped)
	}
	r.mu.Unlock()
	<-r.refusalsDone
}

// Close stops the receiver.
func (r *Receiver) Close() {
	r.Heal()
	_ = r.srv.Close()
}

// Arrivals returns a copy of every request so far.
func (r *Receiver) Arrivals() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Arrival(nil), r.arrivals...)
}

// payload is what the run enqueues for a webhook sink, and what a
// digest's list holds per member.
type payload struct {
	Key    string `json:"k"`
	Poison bool   `json:"poison,omitempty"`
}

// poisonMark marks a Slack message's text as poisoned.
const poisonMark = "[poison]"

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	// The path is /<sink>/<relay>[/api/chat.postMessage].
	parts := strings.SplitN(strings.TrimPrefix(req.URL.Path, "/"), "/", 3)
	if len(parts) < 2 {
		http.Error(w, "unknown path", http.StatusNotFound)
		return
	}
	a := Arrival{At: now, Sink: parts[0], Relay: parts[1], Key: parts[0]}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender gave up
	}
	slack := len(parts) == 3
	var poisoned bool
	if slack {
		poisoned, err = readSlackPost(req, body, &a)
	} else {
		poisoned, err = readWebhook(req, body, &a)
	}
	if err != nil {
		a.Status = http.StatusBadRequest
		r.record(a)
		http.Error(w, err.Error(), a.Status)
		return
	}
	r.mu.Lock()
	win, faulty := r.schedule.At(now.Sub(r.start))
	faulty = faulty && !r.healed
	r.mu.Unlock()
	switch {
	case faulty && (win.Kind == FaultDown || win.Kind == FaultRefuse):
		// A refusal's listener closes a moment late for a request already
		// accepted: answer it as down.
		a.Status = http.StatusServiceUnavailable
	case faulty && win.Kind == FaultThrottle:
		a.Status, a.RetryAfter = http.StatusTooManyRequests, win.RetryAfter
		w.Header().Set("Retry-After", strconv.Itoa(int(win.RetryAfter/time.Second)))
	case poisoned:
		a.Status = http.StatusBadRequest
	default:
		if faulty && win.Kind == FaultSlow {
			t := time.NewTimer(win.Delay)
			select {
			case <-t.C:
			case <-req.Context().Done():
			}
			t.Stop()
		}
		a.Status = http.StatusOK
	}
	r.record(a)
	if a.Status != http.StatusOK {
		http.Error(w, "torture: "+http.StatusText(a.Status), a.Status)
		return
	}
	r.answerOK(w, slack, a)
	if req.Context().Err() != nil {
		r.markLate(a.Seq)
	}
}

// answerOK answers a taken request: 204 for a webhook, Slack's ok answer
// with a timestamp of its own for a post.
func (r *Receiver) answerOK(w http.ResponseWriter, slack bool, a Arrival) {
	if !slack {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	r.mu.Lock()
	r.ts++
	ts := fmt.Sprintf("1700000000.%06d", r.ts)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": a.Key, "ts": ts})
}

func (r *Receiver) record(a Arrival) {
	a.Seq = r.seq.next()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrivals = append(r.arrivals, a)
}

func (r *Receiver) markLate(seq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.arrivals) - 1; i >= 0; i-- {
		if r.arrivals[i].Seq == seq {
			r.arrivals[i].Late = true
			return
		}
	}
}

// readWebhook fills a's delivery id and members from a webhook request: a
// single message's payload, or a digest's list of them.
func readWebhook(req *http.Request, body []byte, a *Arrival) (poisoned bool, err error) {
	a.ID = req.Header.Get("webhook-id")
	if a.ID == "" {
		return false, errors.New("no webhook-id")
	}
	var one payload
	if json.Unmarshal(body, &one) == nil && one.Key != "" {
		a.Members = []string{one.Key}
		return one.Poison, nil
	}
	var list []payload
	if err := json.Unmarshal(body, &list); err != nil {
		return false, fmt.Errorf("body is neither a message nor a digest: %w", err)
	}
	for _, m := range list {
		a.Members = append(a.Members, m.Key)
		poisoned = poisoned || m.Poison
	}
	return poisoned, nil
}

// readSlackPost fills a's channel (its rate key), delivery id and member
// from a chat.postMessage form: the dedup key is in the post's metadata.
func readSlackPost(req *http.Request, body []byte, a *Arrival) (poisoned bool, err error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return false, fmt.Errorf("form: %w", err)
	}
	var md struct {
		Payload map[string]any `json:"event_payload"`
	}
	if err := json.Unmarshal([]byte(form.Get("metadata")), &md); err != nil {
		return false, fmt.Errorf("metadata: %w", err)
	}
	key, _ := md.Payload["dedup_key"].(string)
	if key == "" {
		return false, errors.New("metadata without dedup_key")
	}
	a.Key = form.Get("channel")
	a.ID = a.Sink + "/" + key
	a.Members = []string{key}
	return strings.Contains(form.Get("text"), poisonMark), nil
}
