// Package fakediscord is a small fake of Discord's webhook API, served by
// net/http/httptest, for tests that must never reach the real Discord. It
// enforces the rules Discord documents for webhooks:
//
//   - a rate-limit bucket per webhook (Limit requests per Window), announced
//     on every answer in X-RateLimit-Limit, -Remaining, -Reset-After and
//     -Bucket; past it, 429 with the JSON body {"message", "retry_after"
//     (seconds with a fraction), "global"} and Retry-After in whole
//     seconds, rounded up;
//   - 404 {"code": 10015} for an unknown webhook, 401 {"code": 50027} for a
//     wrong token;
//   - 400 {"code": 50006} for a message with neither content nor embeds,
//     400 {"code": 50035, "errors": ...} (Invalid Form Body) for content
//     over 2000 characters, more than 10 embeds, an embed's title over 256
//     or description over 4096 characters, a username over 80 characters
//     or containing "discord" or "clyde";
//   - threads: thread_id must name a thread of the webhook's channel (404
//     {"code": 10003} otherwise); thread_name creates one, in a forum
//     channel only (400 {"code": 220003} elsewhere); a forum channel needs
//     one of them (220001) and takes not both (220002);
//   - ?wait=true answers the message object (200), else 204;
//   - PATCH .../messages/{id} edits a message of the webhook.
//
// It records every message and request, and answers injected faults on
// demand (Inject).
package fakediscord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Discord's documented webhook bucket, the fake's default.
const (
	DefaultLimit  = 5
	DefaultWindow = 2 * time.Second
)

// The fake's webhook: its id, token and channel.
const (
	WebhookID = "1100000000000000001"
	Token     = "fake-webhook-token"
	ChannelID = "1200000000000000001"
)

// Discord's JSON error codes the fake answers with.
const (
	CodeUnknownChannel       = 10003
	CodeUnknownWebhook       = 10015
	CodeUnknownMessage       = 10008
	CodeEmptyMessage         = 50006
	CodeInvalidWebhookToken  = 50027
	CodeInvalidFormBody      = 50035
	CodeForumNeedsThread     = 220001
	CodeForumThreadIDAndName = 220002
	CodeThreadsOnlyInForums  = 220003
)

// Message is one message the fake holds.
type Message struct {
	ID        string
	ChannelID string // the thread's id when posted into a thread
	Content   string
	Embeds    []map[string]any
	Username  string
	AvatarURL string
	// AllowedMentions is the request's allowed_mentions.parse; nil when
	// the request sent none (Discord then parses every mention).
	AllowedMentions []string
	Edits           int // PATCHes that edited it; Content and Embeds are the latest
	At              time.Time
}

// Request is one request the fake received, with the status it answered.
type Request struct {
	Method string
	At     time.Time
	Status int
}

// Fault is an answer to inject instead of the normal one.
type Fault struct {
	// Status is the HTTP status to answer; 0 handles the request
	// normally, after Delay.
	Status int
	// Body is the JSON answered; empty means Discord's {"code": 0,
	// "message": ...} for Status.
	Body string
	// Delay holds the answer back this long (or until the client gives up).
	Delay time.Duration
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	limit    int
	window   time.Duration
	start    time.Time // the current window's start
	used     int       // requests counted in it
	forum    bool
	threads  map[string]bool // thread id -> exists
	messages []Message
	requests []Request
	faults   []Fault
	nextID   int64
}

// New starts a fake with Discord's bucket (DefaultLimit per DefaultWindow)
// and a text channel. Close it when done.
func New() *Server {
	s := &Server{limit: DefaultLimit, window: DefaultWindow, threads: map[string]bool{}, nextID: 1300000000000000000}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/webhooks/{id}/{token}", s.serveWebhook)
	mux.HandleFunc("PATCH /api/webhooks/{id}/{token}/messages/{message}", s.serveEdit)
	s.srv = httptest.NewServer(mux)
	return s
}

// Close stops the fake.
func (s *Server) Close() { s.srv.Close() }

// URL is the webhook URL of the fake's webhook.
func (s *Server) URL() string { return s.srv.URL + "/api/webhooks/" + WebhookID + "/" + Token }

// SetLimit changes the webhook's bucket: limit requests per window.
func (s *Server) SetLimit(limit int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.window, s.used = limit, window, 0
}

// SetForum makes the webhook's channel a forum channel.
func (s *Server) SetForum(forum bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forum = forum
}

// AddThread creates a thread in the webhook's channel and returns its id.
func (s *Server) AddThread() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newID()
	s.threads[id] = true
	return id
}

// Inject queues faults: each of the next requests is answered with the
// next fault instead of normally.
func (s *Server) Inject(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Messages returns the messages posted so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.messages)
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) newID() string {
	s.nextID++
	return strconv.FormatInt(s.nextID, 10)
}

// executeBody is what Execute Webhook takes, as JSON.
type executeBody struct {
	Content         *string          `json:"content"`
	Embeds          []map[string]any `json:"embeds"`
	Username        string           `json:"username"`
	AvatarURL       string           `json:"avatar_url"`
	ThreadName      string           `json:"thread_name"`
	AllowedMentions *struct {
		Parse []string `json:"parse"`
	} `json:"allowed_mentions"`
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	status, answer, ok := s.admit(w, r)
	if !ok {
		s.reply(w, r, status, answer)
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.reply(w, r, http.StatusOK, map[string]any{"id": WebhookID, "type": 1, "channel_id": ChannelID, "name": "fake"})
	case http.MethodPost:
		status, answer := s.execute(r)
		s.reply(w, r, status, answer)
	default:
		s.reply(w, r, http.StatusMethodNotAllowed, apiError(0, "405: Method Not Allowed"))
	}
}

// admit answers what comes before the request's own handling: an injected
// fault, an unknown webhook or token, an empty bucket. ok says the request
// goes on; else status and answer are the reply.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (status int, answer any, ok bool) {
	s.mu.Lock()
	var fault *Fault
	if len(s.faults) > 0 {
		fault = &s.faults[0]
		s.faults = s.faults[1:]
	}
	s.mu.Unlock()
	if fault != nil {
		// Read the body first (kept for the request's handling): only then
		// does the server notice a client that gives up while the answer is
		// held back.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-time.After(fault.Delay):
		case <-r.Context().Done():
		}
		if fault.Status == 0 {
			fault = nil
		}
	}
	if fault != nil {
		if fault.Body != "" {
			return fault.Status, json.RawMessage(fault.Body), false
		}
		return fault.Status, apiError(0, http.StatusText(fault.Status)), false
	}
	switch {
	case r.PathValue("id") != WebhookID:
		return http.StatusNotFound, apiError(CodeUnknownWebhook, "Unknown Webhook"), false
	case r.PathValue("token") != Token:
		return http.StatusUnauthorized, apiError(CodeInvalidWebhookToken, "Invalid Webhook Token"), false
	}
	if r.Method == http.MethodGet {
		return 0, nil, true
	}
	return s.spend(w)
}

// spend counts a request against the webhook's bucket and announces the
// bucket in w's headers; past the limit the answer is Discord's 429.
func (s *Server) spend(w http.ResponseWriter) (int, any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.start) >= s.window {
		s.start, s.used = now, 0
	}
	resetAfter := s.start.Add(s.window).Sub(now).Seconds()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(resetAfter, 'f', 3, 64))
	h.Set("X-RateLimit-Bucket", "fake-bucket-"+WebhookID)
	if s.used >= s.limit {
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Scope", "user")
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(resetAfter))))
		return http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": math.Round(resetAfter*1000) / 1000, "global": false}, false
	}
	s.used++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(s.limit-s.used))
	return 0, nil, true
}

// execute posts the message r carries, as Discord would.
func (s *Server) execute(r *http.Request) (int, any) {
	var b executeBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		return http.StatusBadRequest, apiError(CodeInvalidFormBody, "Invalid Form Body")
	}
	content := ""
	if b.Content != nil {
		content = *b.Content
	}
	if content == "" && len(b.Embeds) == 0 {
		return http.StatusBadRequest, apiError(CodeEmptyMessage, "Cannot send an empty message")
	}
	if field, problem := invalidField(content, b.Embeds, b.Username); field != "" {
		return http.StatusBadRequest, map[string]any{"code": CodeInvalidFormBody, "message": "Invalid Form Body",
			"errors": map[string]any{field: map[string]any{"_errors": []map[string]string{{"code": "BASE_TYPE_INVALID", "message": problem}}}}}
	}
	threadID := r.URL.Query().Get("thread_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	channel := ChannelID
	switch {
	case threadID != "" && b.ThreadName != "" && s.forum:
		return http.StatusBadRequest, apiError(CodeForumThreadIDAndName, "Webhooks posted to forum channels cannot have both a thread_name and thread_id")
	case threadID != "":
		if !s.threads[threadID] {
			return http.StatusNotFound, apiError(CodeUnknownChannel, "Unknown Channel")
		}
		channel = threadID
	case b.ThreadName != "":
		if !s.forum {
			return http.StatusBadRequest, apiError(CodeThreadsOnlyInForums, "Webhooks can only create threads in forum channels")
		}
		channel = s.newID()
		s.threads[channel] = true
	case s.forum:
		return http.StatusBadRequest, apiError(CodeForumNeedsThread, "Webhooks posted to forum channels must have a thread_name or thread_id")
	}
	m := Message{ID: s.newID(), ChannelID: channel, Content: content, Embeds: b.Embeds, Username: b.Username, AvatarURL: b.AvatarURL, At: time.Now()}
	if b.AllowedMentions != nil {
		m.AllowedMentions = append([]string{}, b.AllowedMentions.Parse...)
	}
	s.messages = append(s.messages, m)
	if r.URL.Query().Get("wait") != "true" {
		return http.StatusNoContent, nil
	}
	return http.StatusOK, map[string]any{"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "webhook_id": WebhookID}
}

// invalidField names the first field Discord's form validation refuses,
// and why; "" when it takes them all.
func invalidField(content string, embeds []map[string]any, username string) (field, problem string) {
	lower := strings.ToLower(username)
	switch {
	case len([]rune(content)) > 2000:
		return "content", "Must be 2000 or fewer in length."
	case len(embeds) > 10:
		return "embeds", "Must be 10 or fewer in length."
	case len([]rune(username)) > 80:
		return "username", "Must be 80 or fewer in length."
	case strings.Contains(lower, "discord") || strings.Contains(lower, "clyde"):
		return "username", "Username cannot contain \"discord\" or \"clyde\"."
	}
	for i, e := range embeds {
		title, _ := e["title"].(string)
		description, _ := e["description"].(string)
		switch {
		case len([]rune(title)) > 256:
			return fmt.Sprintf("embeds.%d.title", i), "Must be 256 or fewer in length."
		case len([]rune(description)) > 4096:
			return fmt.Sprintf("embeds.%d.description", i), "Must be 4096 or fewer in length."
		}
	}
	return "", ""
}

// serveEdit edits a message the webhook posted (Edit Webhook Message).
func (s *Server) serveEdit(w http.ResponseWriter, r *http.Request) {
	status, answer, ok := s.admit(w, r)
	if !ok {
		s.reply(w, r, status, answer)
		return
	}
	var b executeBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		s.reply(w, r, http.StatusBadRequest, apiError(CodeInvalidFormBody, "Invalid Form Body"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	thread := r.URL.Query().Get("thread_id")
	for i := range s.messages {
		m := &s.messages[i]
		if m.ID != r.PathValue("message") || (thread != "" && m.ChannelID != thread) {
			continue
		}
		if b.Content != nil {
			m.Content = *b.Content
		}
		if b.Embeds != nil {
			m.Embeds = b.Embeds
		}
		m.Edits++
		s.replyLocked(w, r, http.StatusOK, map[string]any{"id": m.ID, "channel_id": m.ChannelID, "content": m.Content})
		return
	}
	s.replyLocked(w, r, http.StatusNotFound, apiError(CodeUnknownMessage, "Unknown Message"))
}

func apiError(code int, message string) map[string]any {
	return map[string]any{"code": code, "message": message}
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request, status int, answer any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replyLocked(w, r, status, answer)
}

// replyLocked records the request and writes the answer; s.mu is held.
func (s *Server) replyLocked(w http.ResponseWriter, r *http.Request, status int, answer any) {
	s.requests = append(s.requests, Request{Method: r.Method, At: time.Now(), Status: status})
	if answer == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer)
}
