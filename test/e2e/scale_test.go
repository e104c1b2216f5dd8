package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoServesDeliverOnce runs two `outboxd serve` processes on one
// database and checks that 2,000 messages reach the webhook receiver once
// each: no message lost, none delivered twice.
func TestTwoServesDeliverOnce(t *testing.T) {
	t.Parallel()
	const n = 2000
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "")
	e.mustRun("migrate")
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"sink":"partner","dedup_key":"msg-%d","payload":{"i":%d}}`+"\n", i, i)
	}
	file := filepath.Join(t.TempDir(), "msgs.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.serve()
	e.serve()
	start := time.Now()
	if out := e.mustRun("enqueue", "--file", file); out != fmt.Sprintf("created %d, duplicate 0\n", n) {
		t.Fatalf("enqueue: %q", out)
	}
	eventually(t, 2*time.Minute, "every message to arrive", func() bool {
		distinct, _ := rcv.received()
		return distinct == n
	})
	elapsed := time.Since(start)
	eventually(t, 30*time.Second, "every row to be recorded as sent", func() bool {
		return e.stats()["partner"]["sent_last_hour"] == n
	})
	distinct, total := rcv.received()
	if distinct != n || total != n {
		t.Fatalf("received %d distinct messages in %d deliveries, want %d once each", distinct, total, n)
	}
	t.Logf("two relays delivered %d messages once each in %s", n, elapsed.Round(time.Millisecond))
}
