// Package mailpit runs Mailpit, the real SMTP server of the tests that send
// mail, and reads what it received through its REST API. Its binary is built
// from the tools module by scripts/tools.sh (once; later runs reuse it), and
// each test gets its own Mailpit on free 127.0.0.1 ports with its database
// in a temporary directory.
package mailpit

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// StartTimeout bounds waiting for a started Mailpit to answer.
const StartTimeout = 30 * time.Second

var binary = sync.OnceValues(func() (string, error) { return proc.PinnedTool("mailpit") })

// Server is one running Mailpit.
type Server struct {
	SMTP string // host:port of its SMTP listener
	API  string // base URL of its HTTP API
}

// freeAddr returns a 127.0.0.1 address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start starts a Mailpit for t (stopped at cleanup) with extra flags. It
// fails the test when the binary cannot be built (.ci/run builds it).
func Start(t *testing.T, extra ...string) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("mailpit binary unavailable: %v", err)
	}
	mp := &Server{SMTP: freeAddr(t)}
	httpAddr := freeAddr(t)
	mp.API = "http://" + httpAddr
	args := append([]string{
		"--listen", httpAddr,
		"--smtp", mp.SMTP,
		"--database", t.TempDir() + "/mailpit.db",
		"--disable-version-check",
		"--smtp-auth-accept-any",
		"--smtp-auth-allow-insecure",
		"--smtp-disable-rdns",
		"--quiet",
	}, extra...)
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mailpit: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	deadline := time.Now().Add(StartTimeout)
	for {
		resp, err := http.Get(mp.API + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return mp
			}
		}
		select {
		case <-exited:
			t.Fatalf("mailpit exited before it was ready:\n%s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit not ready after %s:\n%s", StartTimeout, logs.String())
		}
	}
}

// Address is an address as Mailpit's API reports it.
type Address struct{ Name, Address string }

// Message is the part of Mailpit's view of a message that tests check.
type Message struct {
	ID, MessageID, Subject, Text, HTML string
	From                               Address
	To, Cc                             []Address
	Date                               time.Time
}

// getJSON decodes the JSON answer to GET url into out.
func getJSON(t testing.TB, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
}

// Messages lists the summaries of every stored mail whose Message-ID is id
// (without angle brackets, as Mailpit shows it).
func (mp *Server) Messages(t *testing.T, id string) []Message {
	t.Helper()
	var found []Message
	for _, m := range mp.All(t) {
		if m.MessageID == id {
			found = append(found, m)
		}
	}
	return found
}

// All lists the summaries of every stored mail, newest first.
func (mp *Server) All(t testing.TB) []Message {
	t.Helper()
	var list struct{ Messages []Message }
	getJSON(t, mp.API+"/api/v1/messages?limit=1000", &list)
	return list.Messages
}

// Full reads a stored mail in full.
func (mp *Server) Full(t *testing.T, summary Message) Message {
	t.Helper()
	var full Message
	getJSON(t, mp.API+"/api/v1/message/"+summary.ID, &full)
	return full
}

// Headers reads a stored mail's headers, by name.
func (mp *Server) Headers(t *testing.T, summary Message) map[string][]string {
	t.Helper()
	var headers map[string][]string
	getJSON(t, mp.API+"/api/v1/message/"+summary.ID+"/headers", &headers)
	return headers
}

// WaitMessages waits until n mails with Message-ID id are stored and
// returns them in full. It polls Mailpit's API: Mailpit is another process,
// which sends the test no signal when it has stored a mail.
func (mp *Server) WaitMessages(t *testing.T, id string, n int, timeout time.Duration) []Message {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		found := mp.Messages(t, id)
		if len(found) >= n {
			full := make([]Message, len(found))
			for i, m := range found {
				full[i] = mp.Full(t, m)
			}
			return full
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mail(s) with Message-ID %s after %s, want %d", len(found), id, timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SetChaos sets Mailpit's SMTP failure triggers (it must run with
// --enable-chaos): triggers maps "Sender", "Recipient" or "Authentication"
// to the SMTP code returned every time.
func (mp *Server) SetChaos(t testing.TB, triggers map[string]int) {
	t.Helper()
	body := map[string]any{}
	for k, code := range triggers {
		body[k] = map[string]int{"ErrorCode": code, "Probability": 100}
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, mp.API+"/api/v1/chaos", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT /api/v1/chaos: %s", resp.Status)
	}
}
