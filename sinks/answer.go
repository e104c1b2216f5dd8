package sinks

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"unicode/utf8"

	"github.com/outboxd/outboxd/core/sink"
)

// RecordingClient returns a copy of client whose requests record each
// answer for the relay (sink.RecordAnswer, with the request's context):
// its status, its first sink.MaxAnswerBytes and the address the request
// went to, or only the address when no answer came. The answer's body is
// read that far before the caller sees it, and given to the caller whole.
// The request's own header values (an API key, a bearer token a
// receiver might echo) are scrubbed from what is recorded.
func RecordingClient(client *http.Client) *http.Client {
	c := *client
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = answerRecorder{next}
	return &c
}

// answerRecorder is RecordingClient's transport.
type answerRecorder struct{ next http.RoundTripper }

func (a answerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var remote string
	traced := req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
		remote = c.Conn.RemoteAddr().String()
	}}))
	resp, err := a.next.RoundTrip(traced)
	if err != nil {
		sink.RecordAnswer(req.Context(), sink.Answer{RemoteAddr: remote})
		return nil, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, sink.MaxAnswerBytes+utf8.UTFMax))
	sink.RecordAnswer(req.Context(), sink.Answer{Status: resp.StatusCode, Body: scrubHeaders(sink.AnswerBody(body), req.Header), RemoteAddr: remote})
	// The caller reads the answer from its start.
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	return resp, nil
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// minScrubbedHeader is the shortest header value scrubHeaders removes
// from an answer: shorter ones ("json", "1") are no credentials, and
// replacing them would garble the text.
const minScrubbedHeader = 8

// scrubHeaders returns a receiver's answer without the values of the
// request's headers.
func scrubHeaders(answer string, headers http.Header) string {
	for _, values := range headers {
		for _, v := range values {
			if len(v) >= minScrubbedHeader {
				answer = strings.ReplaceAll(answer, v, "[REDACTED]")
			}
		}
	}
	return answer
}
