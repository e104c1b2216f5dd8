package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// routesTestConfig routes order events to a webhook whose secret is not
// set: routes test needs none.
const routesTestConfig = `sinks:
  partner:
    type: webhook
    options: {url: "https://partner.example/hook", secret: "${PARTNER_WEBHOOK_SECRET}"}
routes:
  orders:
    events: [order.*]
    to: [partner]
`

// TestRoutesTestTimestampsTheEventNow: the event routes test renders is
// created now, so the webhook envelope's "timestamp" is the current time,
// not Go's zero time 0001-01-01T00:00:00Z.
// (Mutation: the command leaving ev.CreatedAt unset fails this test.)
func TestRoutesTestTimestampsTheEventNow(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(file, []byte(routesTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	var out, errOut bytes.Buffer
	code := execute(context.Background(), []string{"--config", file, "routes", "test", "--type", "order.created", "--data", `{"id": 42}`, "-o", "json"},
		streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Env: func(string) (string, bool) { return "", false }})
	after := time.Now().Add(time.Second)
	var report struct {
		Targets []struct {
			Sink    string `json:"sink"`
			Payload struct {
				Type      string          `json:"type"`
				Timestamp time.Time       `json:"timestamp"`
				Data      json.RawMessage `json:"data"`
			} `json:"payload"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(out.Bytes(), &report); code != exitOK || err != nil || len(report.Targets) != 1 {
		t.Fatalf("routes test: exit %d, %v\n%s%s", code, err, out.String(), errOut.String())
	}
	p := report.Targets[0].Payload
	if p.Type != "order.created" || p.Timestamp.Before(before) || p.Timestamp.After(after) {
		t.Errorf("the webhook envelope: type %q, timestamp %s, want order.created at about %s", p.Type, p.Timestamp, before.Add(time.Second).UTC())
	}
}
