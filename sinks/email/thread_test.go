package email

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/routing"
)

// Events sharing a thread_key, mailed by the email sink, form one thread
// in mail clients: the first mail is the thread's root (its receipt kept
// like the Slack root's), and each later mail carries In-Reply-To and
// References naming the root's Message-ID, as Mailpit stores them.
// (Mutation: compose not setting the two headers, or Deliver ignoring
// ThreadRoot, leaves the replies without them.)
func TestThreadedMailsReplyToTheFirst(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	pool, ob := testdb.New(t)
	s, err := Type.New("ops-mail", map[string]any{"smtp": mp.smtp, "tls": TLSNone, "from": "outbox@example.com", "to": []any{"ops@example.com"}}, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, ps := routing.Parse(map[string]any{"incidents": map[string]any{"events": []any{"incident.*"},
		"to": []any{map[string]any{"sink": "ops-mail", "template": map[string]any{
			"subject": "{{.data.title}}", "text": "{{.type}}", "thread_key": "{{.key}}"}}}}}, "")
	table, more := routing.Compile(cfg, map[string]sink.Sink{"ops-mail": s})
	if ps = append(ps, more...); len(ps) > 0 {
		t.Fatal(ps)
	}
	if _, err := ob.Routes().Apply(context.Background(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, typ := range []string{"incident.opened", "incident.updated", "incident.resolved"} {
		ev := outboxd.Event{Type: typ, Key: "inc-7", ThreadKey: "inc-7", Data: map[string]string{"title": fmt.Sprint("DB down ", i)}}
		if _, err := ob.Publish(context.Background(), pool, ev); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, typ+"/inc-7/incidents")
	}
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{PollInterval: 50 * time.Millisecond, Stage: table.Stage(nil),
		Sinks: []relay.SinkConfig{{Name: "ops-mail", Type: Type.Name, Sink: s}}})
	signals.WaitWritten(t, relayWait, "ops-mail", "sent", 3)

	root := MessageID("ops-mail", keys[0], "example.com")
	for i, key := range keys {
		m := mp.waitMessages(t, strings.Trim(MessageID("ops-mail", key, "example.com"), "<>"), 1, mailWait)[0]
		h := mp.Headers(t, m)
		inReplyTo, references := strings.Join(h["In-Reply-To"], " "), strings.Join(h["References"], " ")
		if i == 0 {
			if inReplyTo != "" || references != "" {
				t.Errorf("the thread's first mail replies to %q (references %q), want no reply headers", inReplyTo, references)
			}
			continue
		}
		if inReplyTo != root || references != root {
			t.Errorf("mail %d: In-Reply-To %q, References %q, want both %s", i, inReplyTo, references, root)
		}
	}
}
