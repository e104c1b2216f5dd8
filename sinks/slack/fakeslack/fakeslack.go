// Package fakeslack is a small fake of the Slack Web API and of Slack
// incoming webhooks, served by net/http/httptest, for tests that must never
// reach the real Slack.
//
// It records every message posted (with its metadata and arrival time) and
// every edit made with chat.update,
// serves conversations.history and conversations.replies from what was
// posted (honouring oldest, latest, limit, cursor and include_all_metadata),
// knows channels by name ([Server.AddChannel]) for chat.postMessage and a
// paginated conversations.list,
// and answers with injected faults on demand: ok:false errors, HTTP 429 with
// Retry-After, 5xx, slow responses, and "accepted but the answer was lost".
//
// Point a client at [Server.APIURL] (slack.OptionAPIURL) with [Token], or
// post to [Server.WebhookURL].
package fakeslack

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Token is the only bot token the fake accepts; any other gets invalid_auth.
const Token = "xoxb-fake-token"

// The API methods the fake serves, and the name under which incoming-webhook
// posts are recorded and faults injected.
const (
	MethodPostMessage = "chat.postMessage"
	MethodUpdate      = "chat.update"
	MethodHistory     = "conversations.history"
	MethodReplies     = "conversations.replies"
	MethodList        = "conversations.list"
	MethodAuthTest    = "auth.test"
	MethodWebhook     = "incoming-webhook"
)

// WebhookChannel is the channel incoming-webhook posts land in when their
// body names none (a real webhook is bound to one channel).
const WebhookChannel = "CWEBHOOK01"

// defaultPageLimit is Slack's page size when a request sets no limit.
const defaultPageLimit = 100

// Message is one message the fake holds: posted through chat.postMessage or
// the incoming webhook, or seeded by a test.
type Message struct {
	Channel     string
	TS          string
	ThreadTS    string
	Text        string
	Blocks      json.RawMessage // as sent; nil when none
	Username    string
	IconEmoji   string
	UnfurlLinks string   // the raw unfurl_links value, "" when not sent
	Metadata    Metadata // zero when the post carried none
	Webhook     bool     // posted through the incoming webhook
	At          time.Time
	// Updates counts the chat.update calls that edited the message; Text
	// and Blocks are the latest.
	Updates int

	seeded bool // stored by Seed, not posted
}

// Metadata is Slack message metadata.
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
}

// Request is one request the fake received, with the answer it gave.
type Request struct {
	Method string // one of the Method constants, or the unknown path
	At     time.Time
	Status int    // HTTP status of the answer
	Error  string // the ok:false error or webhook error body, "" on success
}

// Fault is an answer to inject instead of the normal one.
type Fault struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Error, with Status 0 or 200, is answered as {"ok":false,"error":Error}
	// (for the webhook: as the plain-text body).
	Error string
	// RetryAfter sets the Retry-After header (whole seconds, rounded up).
	RetryAfter time.Duration
	// Delay holds the answer back this long (or until the client gives up).
	Delay time.Duration
	// Accept performs the request normally (a post is recorded) before the
	// fault is answered: Slack accepted it but the client never learns so.
	Accept bool
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	messages []Message
	requests []Request
	faults   map[string][]Fault
	channels []Channel // in the order added; conversations.list pages through it
	lastTS   int64     // microseconds; keeps ts unique and increasing
}

// New starts a fake. Close it when done.
func New() *Server {
	s := &Server{faults: map[string][]Fault{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.serveAPI)
	mux.HandleFunc("POST /services/", s.serveWebhook)
	s.srv = httptest.NewServer(mux)
	return s
}

// Close shuts the fake down.
func (s *Server) Close() { s.srv.Close() }

// APIURL is the Web API base URL, ending in a slash as slack.OptionAPIURL
// expects.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// WebhookURL is an incoming-webhook URL served by the fake.
func (s *Server) WebhookURL() string { return s.srv.URL + "/services/T00000000/B00000000/fakesecret" }

// Inject queues faults for method (one of the Method constants); each
// request to that method consumes the next one, later requests are answered
// normally.
func (s *Server) Inject(method string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], faults...)
}

// Seed stores a message as if it had been posted before the test started
// and returns it with its ts and time filled in. It is not among [Server.Posts].
func (s *Server) Seed(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.seeded = true
	m.At = time.Now()
	m.TS = s.nextTSLocked(m.At)
	s.messages = append(s.messages, m)
	return m
}

// Posts returns the messages posted to the fake (not seeded), oldest first.
func (s *Server) Posts() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.messages {
		if !m.seeded {
			out = append(out, m)
		}
	}
	return out
}

// Requests returns every request received, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// WaitPosts waits until at least n messages were posted or timeout passes,
// and returns the posts seen.
func (s *Server) WaitPosts(n int, timeout time.Duration) []Message {
	deadline := time.Now().Add(timeout)
	for {
		posts := s.Posts()
		if len(posts) >= n || time.Now().After(deadline) {
			return posts
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	if err := r.ParseForm(); err != nil {
		s.answer(w, method, http.StatusBadRequest, "invalid_form_data", nil)
		return
	}
	fault, faulted := s.nextFault(method)
	var handle func(*http.Request) (map[string]any, string)
	switch method {
	case MethodPostMessage:
		handle = s.postMessage
	case MethodUpdate:
		handle = s.update
	case MethodHistory:
		handle = s.history
	case MethodReplies:
		handle = s.replies
	case MethodList:
		handle = s.list
	case MethodAuthTest:
		handle = s.authTest
	default:
		s.answer(w, method, http.StatusNotFound, "unknown_method", nil)
		return
	}
	if faulted && !fault.Accept {
		s.answerFault(w, r, method, fault)
		return
	}
	if !authorized(r) {
		s.answer(w, method, http.StatusOK, "invalid_auth", nil)
		return
	}
	body, slackErr := handle(r)
	if faulted {
		s.answerFault(w, r, method, fault)
		return
	}
	s.answer(w, method, http.StatusOK, slackErr, body)
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	fault, faulted := s.nextFault(MethodWebhook)
	if faulted && !fault.Accept {
		s.answerFault(w, r, MethodWebhook, fault)
		return
	}
	var body struct {
		Text        string          `json:"text"`
		Blocks      json.RawMessage `json:"blocks"`
		Channel     string          `json:"channel"`
		ThreadTS    string          `json:"thread_ts"`
		Username    string          `json:"username"`
		IconEmoji   string          `json:"icon_emoji"`
		UnfurlLinks *bool           `json:"unfurl_links"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.answerText(w, MethodWebhook, http.StatusBadRequest, "invalid_payload")
		return
	}
	if body.Text == "" && len(body.Blocks) == 0 {
		s.answerText(w, MethodWebhook, http.StatusBadRequest, "no_text")
		return
	}
	m := Message{Text: body.Text, Blocks: body.Blocks, Channel: body.Channel, ThreadTS: body.ThreadTS,
		Username: body.Username, IconEmoji: body.IconEmoji, Webhook: true}
	if m.Channel == "" {
		m.Channel = WebhookChannel
	}
	if body.UnfurlLinks != nil {
		m.UnfurlLinks = formatBool(*body.UnfurlLinks)
	}
	s.record(m)
	if faulted {
		s.answerFault(w, r, MethodWebhook, fault)
		return
	}
	s.answerText(w, MethodWebhook, http.StatusOK, "")
}

func authorized(r *http.Request) bool {
	token := r.Form.Get("token")
	if token == "" {
		token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	return token == Token
}

func (s *Server) nextFault(method string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	queue := s.faults[method]
	if len(queue) == 0 {
		return Fault{}, false
	}
	s.faults[method] = queue[1:]
	return queue[0], true
}

// record stores a posted message, giving it a ts, and returns it.
func (s *Server) record(m Message) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.At = time.Now()
	m.TS = s.nextTSLocked(m.At)
	s.messages = append(s.messages, m)
	return m
}

func (s *Server) nextTSLocked(at time.Time) string {
	us := at.UnixMicro()
	if us <= s.lastTS {
		us = s.lastTS + 1
	}
	s.lastTS = us
	return formatTS(us)
}

func (s *Server) answerFault(w http.ResponseWriter, r *http.Request, method string, f Fault) {
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
		}
	}
	if f.RetryAfter > 0 {
		secs := (f.RetryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", formatInt(int64(secs)))
	}
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	if method == MethodWebhook {
		s.answerText(w, method, status, f.Error)
		return
	}
	if status != http.StatusOK {
		s.log(method, status, f.Error)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(http.StatusText(status)))
		return
	}
	s.answer(w, method, status, f.Error, nil)
}

// answer writes a Web API JSON answer: body with ok:true, or ok:false with
// slackErr.
func (s *Server) answer(w http.ResponseWriter, method string, status int, slackErr string, body map[string]any) {
	s.log(method, status, slackErr)
	if body == nil || slackErr != "" {
		body = map[string]any{}
	}
	body["ok"] = slackErr == ""
	if slackErr != "" {
		body["error"] = slackErr
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// answerText writes an incoming-webhook answer: "ok", or the error text.
func (s *Server) answerText(w http.ResponseWriter, method string, status int, errText string) {
	s.log(method, status, errText)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	if errText == "" {
		errText = "ok"
	}
	_, _ = w.Write([]byte(errText))
}

func (s *Server) log(method string, status int, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Method: method, At: time.Now(), Status: status, Error: errText})
}
