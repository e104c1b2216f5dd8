package email

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// An email sink that digests sends one mail per set of recipients,
// listing its members' subjects and texts in enqueue order, under the
// digest's own Message-ID, through Mailpit; a row no mail can carry is
// dead-lettered alone. (Mutation: RateKey ignoring the recipients
// mails the sales rows to ops; digestMail dropping the list loses the
// members' texts.)
func TestDigestMailsOneListPerRecipients(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	pool, ob := testdb.New(t)
	s, err := Type.New("ops-mail", map[string]any{"smtp": mp.smtp, "tls": TLSNone, "from": "outbox@example.com",
		"to": []any{"ops@example.com"}, "subject_prefix": "[relay]"}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []outboxd.Message
	for i := range 5 {
		msgs = append(msgs, outboxd.Message{Sink: "ops-mail", DedupKey: fmt.Sprint("ops-", i),
			Payload: map[string]string{"subject": fmt.Sprint("disk ", i), "text": fmt.Sprintf("host %d is full", i)}})
	}
	for i := range 3 {
		msgs = append(msgs, outboxd.Message{Sink: "ops-mail", DedupKey: fmt.Sprint("sales-", i),
			Payload: map[string]any{"subject": fmt.Sprint("lead ", i), "text": "call back", "to": "sales@example.com"}})
	}
	msgs = append(msgs, outboxd.Message{Sink: "ops-mail", DedupKey: "no-body", Payload: map[string]string{"subject": "empty"}})
	if _, err := ob.EnqueueBatch(context.Background(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{PollInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "ops-mail", Type: Type.Name, Sink: s, Digest: &sink.DigestPolicy{MaxMessages: 50}}}})
	signals.WaitWritten(t, relayWait, "ops-mail", "sent", 8)
	signals.WaitWritten(t, relayWait, "ops-mail", "dead", 1)

	rows, err := pool.Query(context.Background(), "SELECT digest_id, count(*) FROM "+ob.Schema()+".messages_history GROUP BY digest_id ORDER BY count(*) DESC")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	var counts []int
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		ids, counts = append(ids, id), append(counts, n)
	}
	if rows.Err() != nil || len(ids) != 2 || counts[0] != 5 || counts[1] != 3 {
		t.Fatalf("digests %v of %v rows (%v), want one of 5 and one of 3", ids, counts, rows.Err())
	}
	ops := mp.waitMessages(t, strings.Trim(MessageID("ops-mail", "digest-"+strconv.FormatInt(ids[0], 10), "example.com"), "<>"), 1, mailWait)[0]
	if ops.Subject != "[relay] 5 messages: disk 0" || addresses(ops.To) != "ops@example.com" {
		t.Errorf("ops mail: subject %q to %s", ops.Subject, addresses(ops.To))
	}
	prev := -1
	for i := range 5 {
		at := strings.Index(ops.Text, fmt.Sprintf("host %d is full", i))
		if at < prev {
			t.Errorf("ops mail lacks member %d in order:\n%s", i, ops.Text)
		}
		prev = at
	}
	sales := mp.waitMessages(t, strings.Trim(MessageID("ops-mail", "digest-"+strconv.FormatInt(ids[1], 10), "example.com"), "<>"), 1, mailWait)[0]
	if sales.Subject != "[relay] 3 messages: lead 0" || addresses(sales.To) != "sales@example.com" || strings.Count(sales.Text, "call back") != 3 {
		t.Errorf("sales mail: subject %q to %s, text:\n%s", sales.Subject, addresses(sales.To), sales.Text)
	}
}
