// Package fakepagerduty is a fake of PagerDuty's Events API v2, served by
// net/http/httptest, for tests that must never reach the real PagerDuty.
//
// It keeps the API's documented rules: an event needs a routing key of 32
// characters, an event_action of trigger, acknowledge or resolve, and a
// dedup_key of at most 255 characters (required for acknowledge and
// resolve); a trigger needs a payload with a summary of at most 1024
// characters, a source, a severity among critical, error, warning and
// info, and links and images with their href and src. A refused event
// gets 400 with the errors. A valid event gets 202 and acts on incidents
// as PagerDuty does: a trigger opens an incident for its dedup_key, or
// adds an alert to the one open under it (de-duplicated); acknowledge and
// resolve change the open incident, and change nothing (still 202) when
// none is open under the key. Each routing key may send Limit events per
// Window (PagerDuty's 120 per minute unless SetLimit changes it); beyond
// it the fake answers 429 without Retry-After, as PagerDuty does.
package fakepagerduty

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"
)

// RoutingKey is a routing key of the length PagerDuty's have, for tests.
const RoutingKey = "R0123456789ABCDEF0123456789ABCDE"

// routingKeyLen is the length of every PagerDuty routing key.
const routingKeyLen = 32

// EnqueuePath is the path the fake serves events on, as PagerDuty does.
const EnqueuePath = "/v2/enqueue"

// PagerDuty's documented limits.
const (
	DefaultLimit  = 120
	DefaultWindow = time.Minute
	maxSummary    = 1024
	maxDedupKey   = 255
	maxBody       = 512 << 10
)

// Incident statuses.
const (
	Triggered    = "triggered"
	Acknowledged = "acknowledged"
	Resolved     = "resolved"
)

// What an accepted event did (Event.Outcome).
const (
	Opened       = "opened"       // a trigger opened an incident
	Deduplicated = "deduplicated" // a trigger added an alert to the open incident
	Changed      = "changed"      // an acknowledge or resolve changed the open incident
	Ignored      = "ignored"      // an acknowledge or resolve found no open incident, or nothing to change
)

// Event is one event the fake accepted.
type Event struct {
	RoutingKey  string          `json:"routing_key"`
	EventAction string          `json:"event_action"`
	DedupKey    string          `json:"dedup_key"`
	Payload     *Payload        `json:"payload"`
	Links       []Link          `json:"links"`
	Images      []Image         `json:"images"`
	Client      string          `json:"client"`
	ClientURL   string          `json:"client_url"`
	Outcome     string          `json:"-"`
	At          time.Time       `json:"-"`
	Raw         json.RawMessage `json:"-"` // the body as sent
}

// Payload is a trigger's payload.
type Payload struct {
	Summary       string          `json:"summary"`
	Source        string          `json:"source"`
	Severity      string          `json:"severity"`
	Timestamp     string          `json:"timestamp"`
	Component     string          `json:"component"`
	Group         string          `json:"group"`
	Class         string          `json:"class"`
	CustomDetails json.RawMessage `json:"custom_details"`
}

// Link is an event's link.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

// Image is an event's image.
type Image struct {
	Src  string `json:"src"`
	Href string `json:"href"`
	Alt  string `json:"alt"`
}

// Incident is what the events of one dedup key did, from the trigger
// that opened it.
type Incident struct {
	RoutingKey, DedupKey string
	Status               string
	Summary              string // the opening trigger's
	// Events are the accepted events that acted on it, in order: its
	// trigger, the de-duplicated triggers and its acknowledges and resolves.
	Events []Event
}

// Count returns how many of the incident's events had action.
func (in Incident) Count(action string) int {
	n := 0
	for _, e := range in.Events {
		if e.EventAction == action {
			n++
		}
	}
	return n
}

// Request is one request the fake answered.
type Request struct {
	At     time.Time
	Status int
	Errors []string // why the event was refused, for a 400
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	limit     int
	window    time.Duration
	sent      map[string][]time.Time // per routing key, the counted events' times
	incidents []*Incident            // in the order opened
	events    []Event
	requests  []Request
	faults    []int // statuses to answer the next requests with
}

// New starts a fake. Close it when done.
func New() *Server {
	s := &Server{limit: DefaultLimit, window: DefaultWindow, sent: map[string][]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+EnqueuePath, s.enqueue)
	s.srv = httptest.NewServer(mux)
	return s
}

// URL is the events URL to configure a sink with.
func (s *Server) URL() string { return s.srv.URL + EnqueuePath }

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// SetLimit lets each routing key send limit events per window.
func (s *Server) SetLimit(limit int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.window = limit, window
}

// Fail answers the next len(statuses) requests with those statuses (a 5xx
// outage, say) without looking at them.
func (s *Server) Fail(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, statuses...)
}

// Incidents returns copies of the incidents of routingKey, in the order
// they were opened.
func (s *Server) Incidents(routingKey string) []Incident {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Incident
	for _, in := range s.incidents {
		if in.RoutingKey == routingKey {
			c := *in
			c.Events = slices.Clone(in.Events)
			out = append(out, c)
		}
	}
	return out
}

// Events returns the accepted events, in the order they arrived.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Requests returns every request's answer, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if len(s.faults) > 0 {
		status := s.faults[0]
		s.faults = s.faults[1:]
		s.answer(w, now, status, map[string]any{"status": "error", "message": "injected fault"}, nil)
		return
	}
	var ev Event
	var errs []string
	switch {
	case err != nil:
		errs = []string{"the body could not be read"}
	case len(body) > maxBody:
		errs = []string{"the event is larger than 512 KB"}
	default:
		if err := json.Unmarshal(body, &ev); err != nil {
			errs = []string{"the body is not a JSON event object"}
		} else {
			errs = check(ev)
		}
	}
	if len(errs) > 0 {
		s.answer(w, now, http.StatusBadRequest, map[string]any{"status": "invalid event", "message": "Event object is invalid", "errors": errs}, errs)
		return
	}
	if s.throttled(ev.RoutingKey, now) {
		s.answer(w, now, http.StatusTooManyRequests, map[string]any{"status": "throttle event", "message": "too many events for this routing key; back off and retry"}, nil)
		return
	}
	if ev.DedupKey == "" {
		ev.DedupKey = "fake-" + strconv.Itoa(len(s.events)+1)
	}
	ev.At, ev.Raw = now, body
	ev.Outcome = s.apply(&ev)
	s.events = append(s.events, ev)
	s.answer(w, now, http.StatusAccepted, map[string]any{"status": "success", "message": "Event processed", "dedup_key": ev.DedupKey}, nil)
}

// check returns what PagerDuty would refuse in ev.
func check(ev Event) []string {
	var errs []string
	if len(ev.RoutingKey) != routingKeyLen {
		errs = append(errs, fmt.Sprintf("routing_key must be %d characters", routingKeyLen))
	}
	if len([]rune(ev.DedupKey)) > maxDedupKey {
		errs = append(errs, fmt.Sprintf("dedup_key must be at most %d characters", maxDedupKey))
	}
	switch ev.EventAction {
	case "trigger":
		errs = append(errs, checkTrigger(ev)...)
	case "acknowledge", "resolve":
		if ev.DedupKey == "" {
			errs = append(errs, "dedup_key is required for "+ev.EventAction)
		}
	default:
		errs = append(errs, "event_action must be trigger, acknowledge or resolve")
	}
	return errs
}

func checkTrigger(ev Event) []string {
	var errs []string
	p := ev.Payload
	if p == nil {
		return []string{"payload is required for trigger"}
	}
	if p.Summary == "" {
		errs = append(errs, "payload.summary is required")
	}
	if len([]rune(p.Summary)) > maxSummary {
		errs = append(errs, fmt.Sprintf("payload.summary must be at most %d characters", maxSummary))
	}
	if p.Source == "" {
		errs = append(errs, "payload.source is required")
	}
	if !slices.Contains([]string{"critical", "error", "warning", "info"}, p.Severity) {
		errs = append(errs, "payload.severity must be critical, error, warning or info")
	}
	if p.Timestamp != "" {
		if _, err := time.Parse(time.RFC3339Nano, p.Timestamp); err != nil {
			errs = append(errs, "payload.timestamp must be an ISO 8601 date and time")
		}
	}
	for i, l := range ev.Links {
		if l.Href == "" {
			errs = append(errs, fmt.Sprintf("links[%d].href is required", i))
		}
	}
	for i, im := range ev.Images {
		if im.Src == "" {
			errs = append(errs, fmt.Sprintf("images[%d].src is required", i))
		}
	}
	return errs
}

// throttled counts an event of routingKey at now, unless the key has sent
// its limit within the window, and reports whether it had.
func (s *Server) throttled(routingKey string, now time.Time) bool {
	times := s.sent[routingKey]
	for len(times) > 0 && now.Sub(times[0]) >= s.window {
		times = times[1:]
	}
	if len(times) >= s.limit {
		s.sent[routingKey] = times
		return true
	}
	s.sent[routingKey] = append(times, now)
	return false
}

// apply acts on the incidents as PagerDuty does and says how.
func (s *Server) apply(ev *Event) string {
	open := s.open(ev.RoutingKey, ev.DedupKey)
	switch {
	case ev.EventAction == "trigger" && open == nil:
		s.incidents = append(s.incidents, &Incident{RoutingKey: ev.RoutingKey, DedupKey: ev.DedupKey, Status: Triggered,
			Summary: ev.Payload.Summary, Events: []Event{*ev}})
		return Opened
	case ev.EventAction == "trigger":
		open.Events = append(open.Events, *ev)
		return Deduplicated
	case open == nil, ev.EventAction == "acknowledge" && open.Status == Acknowledged:
		return Ignored
	}
	open.Events = append(open.Events, *ev)
	open.Status = Acknowledged
	if ev.EventAction == "resolve" {
		open.Status = Resolved
	}
	return Changed
}

// open returns the incident open (not resolved) under the key, or nil.
func (s *Server) open(routingKey, dedupKey string) *Incident {
	for _, in := range s.incidents {
		if in.RoutingKey == routingKey && in.DedupKey == dedupKey && in.Status != Resolved {
			return in
		}
	}
	return nil
}

// answer records the request and writes the answer.
func (s *Server) answer(w http.ResponseWriter, at time.Time, status int, body map[string]any, errs []string) {
	s.requests = append(s.requests, Request{At: at, Status: status, Errors: errs})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
