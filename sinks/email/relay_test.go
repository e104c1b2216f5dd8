package email

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// relayWait bounds waiting for the relay to finish the test's rows.
const relayWait = 30 * time.Second

// TestRelayDeliversThroughMailpit runs the whole path: a producer enqueues,
// a relay delivers through the registered email sink to Mailpit, and the
// rows record the outcome (sent with the Message-ID as receipt, or dead for
// a payload no retry can send).
func TestRelayDeliversThroughMailpit(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	pool, ob := testdb.New(t)
	sink, err := Type.New("ops-mail", map[string]any{
		"smtp": mp.smtp, "tls": TLSNone, "from": "outbox@example.com",
		"to": []any{"ops@example.com"}, "subject_prefix": "[relay]",
	}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	good, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "ops-mail", DedupKey: "invoice-9", Payload: "a plain string"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "ops-mail", DedupKey: "no-body", Payload: map[string]string{"subject": "empty"}})
	if err != nil {
		t.Fatal(err)
	}

	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{PollInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "ops-mail", Type: Type.Name, Sink: sink}},
	})
	signals.WaitWritten(t, relayWait, "ops-mail", "sent", 1)
	signals.WaitWritten(t, relayWait, "ops-mail", "dead", 1)

	wantID := MessageID("ops-mail", "invoice-9", "example.com")
	status, receiptID, _ := readFinished(t, ob, pool, good.ID)
	if status != "sent" || receiptID != wantID {
		t.Fatalf("good row: status %s, receipt message_id %q; want sent with %s", status, receiptID, wantID)
	}
	m := mp.waitMessages(t, strings.Trim(wantID, "<>"), 1, mailWait)[0]
	if m.Subject != "[relay]" || strings.TrimSpace(m.Text) != "a plain string" || addresses(m.To) != "ops@example.com" {
		t.Errorf("mail: subject %q, text %q, to %s", m.Subject, m.Text, addresses(m.To))
	}

	status, _, lastError := readFinished(t, ob, pool, bad.ID)
	if status != "dead" || !strings.Contains(lastError, "neither text nor html") {
		t.Fatalf("bad row: status %s, last error %q; want dead naming the missing body", status, lastError)
	}
}

// readFinished returns row id's status, receipt message_id and last error.
func readFinished(t *testing.T, ob *testdb.Outbox, pool outboxd.DBTX, id int64) (status, receiptID, lastError string) {
	t.Helper()
	err := pool.QueryRow(context.Background(),
		"SELECT status, COALESCE(receipt->>'message_id', ''), COALESCE(last_error, '') FROM "+ob.Schema()+".messages_all WHERE id = $1",
		id).Scan(&status, &receiptID, &lastError)
	if err != nil {
		t.Fatalf("read row %d: %v", id, err)
	}
	return status, receiptID, lastError
}
