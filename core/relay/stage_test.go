package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// upperStage prepares every delivery the way routing's stage renders a
// published row: it replaces the payload, {"to": "x"} becoming
// {"to": "X", "prepared": true}, and refuses a payload without "to". It
// records whether each call had a deadline.
type upperStage struct {
	mu           sync.Mutex
	noDeadline   int
	sinksPrepped map[string]int
}

func (s *upperStage) Prepare(ctx context.Context, sinkName string, d *sink.Delivery) error {
	s.mu.Lock()
	if _, ok := ctx.Deadline(); !ok {
		s.noDeadline++
	}
	s.sinksPrepped[sinkName]++
	s.mu.Unlock()
	var p struct{ To string }
	if err := json.Unmarshal(d.Payload, &p); err != nil || p.To == "" {
		return sink.Permanent(errors.New("no receiver in the payload"))
	}
	d.Payload = json.RawMessage(fmt.Sprintf(`{"to":%q,"prepared":true}`, strings.ToUpper(p.To)))
	return nil
}

// keyedRecorder names each delivery's rate key from its payload and
// records what it delivered.
type keyedRecorder struct {
	mu   sync.Mutex
	keys []string
	got  []string
}

func (k *keyedRecorder) RateKey(d *sink.Delivery) (string, error) {
	var p struct{ To string }
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return "", err
	}
	k.mu.Lock()
	k.keys = append(k.keys, p.To)
	k.mu.Unlock()
	return p.To, nil
}

func (k *keyedRecorder) Deliver(_ context.Context, d *sink.Delivery) error {
	k.mu.Lock()
	k.got = append(k.got, string(d.Payload))
	k.mu.Unlock()
	return nil
}

// The relay runs its Stage on every row before it asks a per-key sink for
// the rate key and before Deliver, under a deadline, once per attempt;
// a row the stage refuses ends with the stage's error. (Mutations:
// calling the stage after RateKey fails the keys check, which then
// sees the lower-case key; calling it without the budget's timeout fails
// the deadline check; calling it twice per row fails the count.)
func TestStagePreparesEveryDeliveryBeforeTheSinkSeesIt(t *testing.T) {
	b := coretest.Setup(t)
	stage := &upperStage{sinksPrepped: map[string]int{}}
	keyed := &keyedRecorder{}
	plain := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{Stage: stage, Sinks: []relay.SinkConfig{
		{Name: "keyed", Sink: keyed, RateLimit: &sink.RateLimit{Rate: 1000, Per: time.Second, PerKey: true}},
		{Name: "plain", Sink: plain},
	}})
	for i, m := range []outboxd.Message{
		{Sink: "keyed", DedupKey: "k1", Payload: map[string]string{"to": "alpha"}},
		{Sink: "keyed", DedupKey: "k2", Payload: map[string]string{"to": "beta"}},
		{Sink: "plain", DedupKey: "p1", Payload: map[string]string{"to": "gamma"}},
		{Sink: "plain", DedupKey: "p2", Payload: map[string]string{"nothing": "here"}},
	} {
		if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	signals.WaitWritten(t, 30*time.Second, "keyed", "sent", 2)
	signals.WaitWritten(t, 30*time.Second, "plain", "sent", 1)
	signals.WaitWritten(t, 30*time.Second, "plain", "dead", 1)

	keyed.mu.Lock()
	keys, got := strings.Join(keyed.keys, ","), strings.Join(keyed.got, ",")
	keyed.mu.Unlock()
	if keys != "ALPHA,BETA" && keys != "BETA,ALPHA" {
		t.Errorf("rate keys %q, want them named from the prepared payloads", keys)
	}
	if !strings.Contains(got, `{"to":"ALPHA","prepared":true}`) || !strings.Contains(got, `{"to":"BETA","prepared":true}`) {
		t.Errorf("the keyed sink delivered %s, want the prepared payloads", got)
	}
	if d := plain.Snapshot(); len(d) != 1 || string(d[0].Payload) != `{"to":"GAMMA","prepared":true}` {
		t.Errorf("the plain sink delivered %v, want the one prepared payload", d)
	}
	stage.mu.Lock()
	defer stage.mu.Unlock()
	if stage.noDeadline > 0 {
		t.Errorf("%d Prepare calls had no deadline; want each under the delivery's", stage.noDeadline)
	}
	if stage.sinksPrepped["keyed"] != 2 || stage.sinksPrepped["plain"] != 2 {
		t.Errorf("Prepare calls per sink %v, want one per row", stage.sinksPrepped)
	}
	var lastError string
	if err := b.Pool.QueryRow(b.Ctx, "SELECT last_error FROM "+b.Outbox.Schema()+".messages WHERE dedup_key = 'p2'").Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lastError, "no receiver in the payload") {
		t.Errorf("the refused row's error %q, want the stage's", lastError)
	}
}
