// Package faketeams is a fake of a Microsoft Teams Workflows webhook
// ("When a Teams webhook request is received"), served by
// net/http/httptest, for tests that must never reach Microsoft.
//
// It enforces what the real one documents and answers: the URL's sig
// parameter (401 without the right one), a POST of a message whose
// attachments are Adaptive Cards (400 otherwise), Teams' 28 KB message
// size (413), and its rate limit of four requests a second per webhook
// (429 with Retry-After in seconds, [Server.Limit] changes it). An
// accepted request is answered 202 with an empty body, as the workflow
// answers before it posts the card. Faults are injected with
// [Server.Inject].
package faketeams

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// Sig is the signature [Server.WebhookURL] carries; a request with any
// other is refused with 401.
const Sig = "fake-signature"

// What the fake enforces, as Teams documents it.
const (
	// MaxMessageBytes is Teams' message size limit.
	MaxMessageBytes = 28 * 1024
	// DefaultLimit requests per DefaultWindow are what one webhook takes.
	DefaultLimit  = 4
	DefaultWindow = time.Second
	// cardContentType is the only attachment content type a Workflows
	// webhook posts as a card.
	cardContentType = "application/vnd.microsoft.card.adaptive"
)

// Post is one card the fake accepted.
type Post struct {
	// DeliveryID is the request's Idempotency-Key header.
	DeliveryID string
	// Card is the Adaptive Card, as sent.
	Card json.RawMessage
	At   time.Time
}

// Fault is an answer [Server.Inject] makes the next request get.
type Fault struct {
	Status     int           // the HTTP status; 0 answers as usual after Delay
	RetryAfter time.Duration // sent as Retry-After in whole seconds when not 0
	Delay      time.Duration // waits this long (or until the client gives up) first
}

// Server is a fake Workflows webhook.
type Server struct {
	*httptest.Server

	mu          sync.Mutex
	posts       []Post
	faults      []Fault
	limit       int
	window      time.Duration
	windowStart time.Time
	inWindow    int
	throttled   int
	requests    int
}

// New starts a fake webhook; Close stops it.
func New() *Server {
	s := &Server{limit: DefaultLimit, window: DefaultWindow}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// WebhookURL is the URL a sink posts to, in the form of a Workflows
// webhook URL, signed with Sig.
func (s *Server) WebhookURL() string { return s.URLWithSig(Sig) }

// URLWithSig is the webhook's URL signed with sig.
func (s *Server) URLWithSig(sig string) string {
	return s.URL + "/workflows/fake/triggers/manual/paths/invoke?api-version=2016-06-01&sig=" + sig
}

// Limit makes the fake take n requests per window and answer the others
// 429, as Teams throttles a webhook.
func (s *Server) Limit(n int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.window = n, window
}

// Inject makes the next request answer f; faults queue up in order.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Posts returns the cards accepted so far.
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

// Throttled counts the requests answered 429 by the rate limit.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	if f, ok := s.nextFault(); ok {
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
			fail(w, f.Status, "InjectedFault", "injected by the test")
			return
		}
	}
	switch {
	case r.Method != http.MethodPost:
		fail(w, http.StatusMethodNotAllowed, "TriggerRequestMethodNotValid", "the trigger takes POST")
		return
	case r.URL.Query().Get("sig") != Sig:
		fail(w, http.StatusUnauthorized, "DirectApiInvalidAuthorizationSignature", "the request's signature is not valid")
		return
	case len(body) > MaxMessageBytes:
		fail(w, http.StatusRequestEntityTooLarge, "MessageTooLarge", fmt.Sprintf("the message takes %d bytes, at most %d", len(body), MaxMessageBytes))
		return
	}
	if wait, ok := s.admit(); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		fail(w, http.StatusTooManyRequests, "TooManyRequests", "rate limit is exceeded")
		return
	}
	card, err := checkMessage(body)
	if err != nil {
		fail(w, http.StatusBadRequest, "InvalidRequestContent", err.Error())
		return
	}
	s.mu.Lock()
	s.posts = append(s.posts, Post{DeliveryID: r.Header.Get("Idempotency-Key"), Card: card, At: time.Now()})
	s.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) nextFault() (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return Fault{}, false
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f, true
}

// admit counts a request in the current window, or reports how long
// until the next window when the current one is full.
func (s *Server) admit() (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.windowStart) >= s.window {
		s.windowStart, s.inWindow = now, 0
	}
	if s.inWindow >= s.limit {
		s.throttled++
		return s.window - now.Sub(s.windowStart), false
	}
	s.inWindow++
	return 0, true
}

// checkMessage returns the card of a message a Workflows webhook posts:
// {"type": "message", "attachments": [{"contentType": adaptive card,
// "content": {"type": "AdaptiveCard", "version", ...}}]}.
func checkMessage(body []byte) (json.RawMessage, error) {
	var m struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string          `json:"contentType"`
			Content     json.RawMessage `json:"content"`
		} `json:"attachments"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the request content is not valid JSON: %w", err)
	}
	if m.Type != "message" || len(m.Attachments) != 1 {
		return nil, errors.New(`want {"type": "message", "attachments": [one card]}`)
	}
	a := m.Attachments[0]
	var card struct {
		Type    string `json:"type"`
		Version string `json:"version"`
	}
	if a.ContentType != cardContentType || json.Unmarshal(a.Content, &card) != nil || card.Type != "AdaptiveCard" || card.Version == "" {
		return nil, errors.New("the attachment is not an Adaptive Card with a version")
	}
	return a.Content, nil
}

// fail answers status with an error body in the form Power Automate uses.
func fail(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
