// Package fakemattermost is a fake of a Mattermost server's incoming
// webhooks, served by net/http/httptest, for tests that must never reach
// a real server.
//
// It answers as Mattermost does: 200 with the body "ok" for a post it
// keeps; 400 with Mattermost's JSON error for an unknown hook, a body
// that is not JSON, a post without text or attachments, or attachments
// that are not a list; 404 for a channel it does not know; 403 for a
// payload naming another channel than a locked hook's
// ([Server.AddHook]); and, once [Server.Limit] turns its rate limiter on
// (Mattermost's is off by default), 429 with Retry-After and the
// X-RateLimit-* headers in seconds. Faults are injected with
// [Server.Inject].
package fakemattermost

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hook is the key of the hook [New] creates, posting to DefaultChannel
// and not locked to it.
const Hook = "fakehookkey0000000000000000"

// DefaultChannel is the channel of Hook, and one the fake knows.
const DefaultChannel = "town-square"

// Post is one post the fake kept.
type Post struct {
	Hook        string
	Channel     string
	Text        string
	Username    string
	IconURL     string
	Attachments json.RawMessage // as sent; nil when none
	Props       map[string]any
	At          time.Time
}

// Fault is an answer [Server.Inject] makes the next request get.
type Fault struct {
	Status     int           // the HTTP status; 0 answers as usual after Delay
	RetryAfter time.Duration // sent as Retry-After in whole seconds when not 0
	Delay      time.Duration // waits this long (or until the client gives up) first
}

// hook is an incoming webhook: its channel, and whether posts may name
// another.
type hook struct {
	channel string
	locked  bool
}

// Server is a fake Mattermost server's incoming webhooks.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	hooks    map[string]hook
	channels map[string]bool
	posts    []Post
	faults   []Fault
	requests int
	// The rate limiter: a token bucket of burst tokens refilled at
	// perSec a second; off while perSec is 0.
	perSec, burst int
	tokens        float64
	refilled      time.Time
	throttled     int
}

// New starts a fake server with the hook Hook; Close stops it.
func New() *Server {
	s := &Server{hooks: map[string]hook{Hook: {channel: DefaultChannel}}, channels: map[string]bool{DefaultChannel: true}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// HookURL is the URL of the incoming webhook key.
func (s *Server) HookURL(key string) string { return s.URL + "/hooks/" + key }

// AddChannel makes the fake know a channel by its name.
func (s *Server) AddChannel(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[name] = true
}

// AddHook creates an incoming webhook posting to channel; a locked one
// refuses posts naming another channel.
func (s *Server) AddHook(key, channel string, locked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks[key] = hook{channel: channel, locked: locked}
	s.channels[channel] = true
}

// Limit turns on the rate limiter: perSec requests a second with a burst
// of burst, as Mattermost's RateLimitSettings.
func (s *Server) Limit(perSec, burst int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perSec, s.burst, s.tokens, s.refilled = perSec, burst, float64(burst), time.Now()
}

// Inject makes the next request answer f; faults queue up in order.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Posts returns the posts kept so far.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// Requests counts the requests received, whatever their answer.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Throttled counts the requests the rate limiter answered 429.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}

// request is what the fake reads of an incoming-webhook request.
type request struct {
	Text        string          `json:"text"`
	Channel     string          `json:"channel"`
	Username    string          `json:"username"`
	IconURL     string          `json:"icon_url"`
	Attachments json.RawMessage `json:"attachments"`
	Props       map[string]any  `json:"props"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Read first: only then does the server notice a client giving up.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f := s.arrive()
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if f.Status != 0 {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
		}
		appError(w, f.Status, "fake.injected.app_error", "Injected by the test.")
		return
	}
	if wait, ok := s.admit(w); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		http.Error(w, "limit exceeded", http.StatusTooManyRequests)
		return
	}
	key, found := strings.CutPrefix(r.URL.Path, "/hooks/")
	s.mu.Lock()
	h, known := s.hooks[key]
	s.mu.Unlock()
	if r.Method != http.MethodPost || !found || !known {
		appError(w, http.StatusBadRequest, "web.incoming_webhook.invalid.app_error", "Invalid webhook.")
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		appError(w, http.StatusBadRequest, "web.incoming_webhook.parse.app_error", "Unable to parse incoming data.")
		return
	}
	var attachments []map[string]any
	if len(req.Attachments) > 0 && json.Unmarshal(req.Attachments, &attachments) != nil {
		appError(w, http.StatusBadRequest, "web.incoming_webhook.parse.app_error", "Unable to parse incoming data.")
		return
	}
	if req.Text == "" && len(attachments) == 0 {
		appError(w, http.StatusBadRequest, "web.incoming_webhook.text.app_error", "No text specified.")
		return
	}
	channel := h.channel
	if req.Channel != "" && req.Channel != h.channel {
		if h.locked {
			appError(w, http.StatusForbidden, "web.incoming_webhook.channel_locked.app_error", "This webhook is not permitted to post to the requested channel.")
			return
		}
		channel = req.Channel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.channels[strings.TrimPrefix(channel, "@")] {
		appError(w, http.StatusNotFound, "web.incoming_webhook.channel.app_error", "Couldn't find the channel.")
		return
	}
	s.posts = append(s.posts, Post{Hook: key, Channel: channel, Text: req.Text, Username: req.Username, IconURL: req.IconURL,
		Attachments: req.Attachments, Props: req.Props, At: time.Now()})
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok"))
}

// arrive counts a request and returns the fault injected for it, zero
// when none is.
func (s *Server) arrive() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if len(s.faults) == 0 {
		return Fault{}
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f
}

// admit takes a token from the rate limiter's bucket and sets the
// X-RateLimit-* headers, or reports in how many whole seconds a token
// will be there.
func (s *Server) admit(w http.ResponseWriter) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perSec == 0 {
		return 0, true
	}
	now := time.Now()
	s.tokens = math.Min(float64(s.burst), s.tokens+now.Sub(s.refilled).Seconds()*float64(s.perSec))
	s.refilled = now
	w.Header().Set("X-RateLimit-Limit", strconv.Itoa(s.perSec))
	if s.tokens >= 1 {
		s.tokens--
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(int(s.tokens)))
		w.Header().Set("X-RateLimit-Reset", "0")
		return 0, true
	}
	s.throttled++
	wait := int(math.Ceil((1 - s.tokens) / float64(s.perSec)))
	w.Header().Set("X-RateLimit-Remaining", "0")
	w.Header().Set("X-RateLimit-Reset", strconv.Itoa(wait))
	return wait, false
}

// appError answers status with Mattermost's JSON error.
func appError(w http.ResponseWriter, status int, id, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "message": message, "status_code": status})
}
