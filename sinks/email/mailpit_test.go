package email

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mailpit is the real SMTP server of the integration tests. Its binary is
// built from the tools module by scripts/tools.sh (once; later runs reuse
// it), started per test on free 127.0.0.1 ports with its database in a
// temporary directory, and read back through its REST API.

// toolsScript is scripts/tools.sh relative to this package.
const toolsScript = "../../scripts/tools.sh"

// mailpitStartTimeout bounds waiting for a started Mailpit to answer.
const mailpitStartTimeout = 30 * time.Second

var mailpitBin = sync.OnceValues(func() (string, error) {
	build := exec.Command(toolsScript, "build", "mailpit")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s build mailpit: %v\n%s", toolsScript, err, out)
	}
	out, err := exec.Command(toolsScript, "path", "mailpit").Output()
	if err != nil {
		return "", fmt.Errorf("%s path mailpit: %v", toolsScript, err)
	}
	return strings.TrimSpace(string(out)), nil
})

// mailpit is one running Mailpit.
type mailpit struct {
	smtp string // host:port of its SMTP listener
	api  string // base URL of its HTTP API
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

// startMailpit starts a Mailpit for t (stopped at cleanup) with extra flags.
func startMailpit(t *testing.T, extra ...string) *mailpit {
	t.Helper()
	bin, err := mailpitBin()
	if err != nil {
		t.Skipf("mailpit binary unavailable: %v", err)
	}
	mp := &mailpit{smtp: freeAddr(t)}
	httpAddr := freeAddr(t)
	mp.api = "http://" + httpAddr
	args := append([]string{
		"--listen", httpAddr,
		"--smtp", mp.smtp,
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

	deadline := time.Now().Add(mailpitStartTimeout)
	for {
		resp, err := http.Get(mp.api + "/readyz")
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
			t.Fatalf("mailpit not ready after %s:\n%s", mailpitStartTimeout, logs.String())
		}
	}
}

// mailpitAddress is an address as Mailpit's API reports it.
type mailpitAddress struct{ Name, Address string }

// mailpitMessage is the subset of Mailpit's message view the tests check.
type mailpitMessage struct {
	ID, MessageID, Subject, Text, HTML string
	From                               mailpitAddress
	To, Cc                             []mailpitAddress
	Date                               time.Time
}

// getJSON decodes the JSON answer to GET url into out.
func getJSON(t *testing.T, url string, out any) {
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

// messages lists the summaries of every stored mail whose Message-ID is id
// (without angle brackets, as Mailpit shows it).
func (mp *mailpit) messages(t *testing.T, id string) []mailpitMessage {
	t.Helper()
	var list struct{ Messages []mailpitMessage }
	getJSON(t, mp.api+"/api/v1/messages?limit=1000", &list)
	var found []mailpitMessage
	for _, m := range list.Messages {
		if m.MessageID == id {
			found = append(found, m)
		}
	}
	return found
}

// waitMessages waits until n mails with Message-ID id are stored and
// returns them in full.
func (mp *mailpit) waitMessages(t *testing.T, id string, n int, timeout time.Duration) []mailpitMessage {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		found := mp.messages(t, id)
		if len(found) >= n {
			full := make([]mailpitMessage, len(found))
			for i, m := range found {
				getJSON(t, mp.api+"/api/v1/message/"+m.ID, &full[i])
			}
			return full
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mail(s) with Message-ID %s after %s, want %d", len(found), id, timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setChaos sets Mailpit's SMTP failure triggers (it must run with
// --enable-chaos): triggers maps "Sender", "Recipient" or "Authentication"
// to the SMTP code returned every time.
func (mp *mailpit) setChaos(t *testing.T, triggers map[string]int) {
	t.Helper()
	body := map[string]any{}
	for k, code := range triggers {
		body[k] = map[string]int{"ErrorCode": code, "Probability": 100}
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, mp.api+"/api/v1/chaos", bytes.NewReader(b))
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
