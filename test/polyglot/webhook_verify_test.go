package polyglot_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

func whsec(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

// nodeReceiver is a running examples/node/receiver.mjs.
type nodeReceiver struct {
	url   string
	mu    sync.Mutex
	lines []map[string]any
}

// startNodeReceiver runs receiver.mjs with secret and collects the JSON
// lines it prints, one per request.
func startNodeReceiver(t *testing.T, secret string) *nodeReceiver {
	t.Helper()
	cmd := exec.Command(proc.RequireTool(t, "node"), "receiver.mjs")
	cmd.Dir = nodeExamples
	cmd.Env = append(cmd.Environ(), "WEBHOOK_SECRET="+secret)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "listening ") {
		t.Fatalf("receiver.mjs did not start: %q %v", sc.Text(), sc.Err())
	}
	r := &nodeReceiver{url: strings.TrimPrefix(sc.Text(), "listening ")}
	go func() {
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				line = map[string]any{"unparsed": sc.Text()}
			}
			r.mu.Lock()
			r.lines = append(r.lines, line)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *nodeReceiver) seen() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.lines...)
}

// TestNodeReceiverVerifiesTheSinksSignatures delivers through the webhook
// sink of `outboxd serve` to examples/node/receiver.mjs, which verifies with
// npm's standardwebhooks: the sink signing with a new and the receiver's
// (old) secret during a rotation is verified, byte for byte; a sink signing
// with another secret is refused (401), and its message becomes a dead
// letter.
func TestNodeReceiverVerifiesTheSinksSignatures(t *testing.T) {
	t.Parallel()
	requireNodeExamples(t)
	secret := whsec("the-receiver-s-own-32-byte-key!!")
	rcv := startNodeReceiver(t, secret)
	o := newOutbox(t, fmt.Sprintf(`  signed:
    type: webhook
    options: {url: %[1]q, secrets: [%[2]q, %[3]q], allow_private: true}
  forged:
    type: webhook
    max_attempts: 1
    options: {url: %[1]q, secret: %[4]q, allow_private: true}
`, rcv.url, whsec("a-new-secret-being-rolled-out-32"), secret, whsec("not-the-receiver-s-secret-32byte")))
	o.serve(t)
	for sink, key := range map[string]string{"signed": "order-1", "forged": "order-2"} {
		if r, err := proc.Run(t.Context(), binary, proc.Environ(), nil, "--config", o.config,
			"enqueue", "--sink", sink, "--key", key, "--payload", `{"order": "`+key+`", "note": "héllo ✓"}`); err != nil || r.Code != 0 {
			t.Fatalf("enqueue: %v %+v", err, r)
		}
	}
	testrelay.WaitFor(t, deliveryTimeout, "two requests at the receiver", func() bool { return len(rcv.seen()) >= 2 })
	var verified, refused int
	for _, line := range rcv.seen() {
		switch line["verified"] {
		case true:
			verified++
			payload, _ := json.Marshal(line["payload"])
			// id is the delivery id "<sink>/<dedup key>" (it was the bare key).
			if line["id"] != "signed/order-1" || string(payload) != `{"note":"héllo ✓","order":"order-1"}` {
				t.Errorf("verified %v, want order-1 with its payload", line)
			}
		case false:
			refused++
		default:
			t.Errorf("receiver printed %v", line)
		}
	}
	if verified != 1 || refused != 1 {
		t.Fatalf("receiver saw %v; want one verified and one refused request", rcv.seen())
	}
	testrelay.WaitFor(t, deliveryTimeout, "the refused message to be a dead letter", func() bool {
		r, err := proc.Run(t.Context(), binary, proc.Environ(), nil, "--config", o.config, "stats", "--json")
		if err != nil || r.Code != 0 {
			t.Fatalf("stats: %v %+v", err, r)
		}
		var stats struct {
			Sinks map[string]struct {
				SentLastHour int `json:"sent_last_hour"`
				Dead         int
			}
		}
		if err := json.Unmarshal([]byte(r.Stdout), &stats); err != nil {
			t.Fatal(err)
		}
		return stats.Sinks["forged"].Dead == 1 && stats.Sinks["signed"].SentLastHour == 1
	})
}
