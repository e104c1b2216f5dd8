package events_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testrelay"
)

// digestConfig is a routed Slack target at Slack's one post per second per
// channel, with a digest window and a digest template.
const digestConfig = `database:
  url: ${DATABASE_URL}
sinks:
  ops-slack:
    type: slack
    rate_limit: {rate: 1, per: 1s, burst: 1, per_key: true}
    options:
      token: ${SLACK_BOT_TOKEN}
      channel: ${SLACK_CHANNEL}
      api_url: ${SLACK_API_URL}
routes:
  alerts:
    events: [alert.fired]
    sample: {type: alert.fired, data: {service: api, title: "CPU high"}}
    to:
      - sink: ops-slack
        template: {text: "{{.data.title}}"}
        digest:
          window: 3s
          max_messages: 50
          template: {text: "{{len .messages}} alerts"}
`

// The real binary with a routed Slack target and a digest window, under a
// burst: 200 alerts published at once arrive in a handful of posts (at most
// 50 members each, so at least 4), every row sent exactly once, each post
// rendered by the digest template.
// (Mutation checked: the target without its digest block, 200 posts at one
// a second, times out.)
func TestRoutedSlackDigestUnderABurst(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	d.config = filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(d.config, []byte(digestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	d.mustOutboxd("migrate")
	const alerts = 200
	var lines strings.Builder
	for i := range alerts {
		fmt.Fprintf(&lines, `{"type":"alert.fired","key":"a-%d","data":{"service":"api","title":"alert %d"}}`+"\n", i, i)
	}
	file := filepath.Join(t.TempDir(), "alerts.jsonl")
	if err := os.WriteFile(file, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	d.mustOutboxd("publish", "--file", file)
	d.serve()
	pool := testdb.Pool(t, 1)
	sent := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+d.schema+".messages_all WHERE sink = 'ops-slack' AND status = 'sent'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testrelay.WaitFor(t, 60*time.Second, "every alert sent", func() bool { return sent() == alerts })
	posts := d.slack.Posts()
	if len(posts) < alerts/50 || len(posts) > 12 {
		t.Fatalf("%d posts for %d alerts, want a handful (4 to 12)", len(posts), alerts)
	}
	members := 0
	for _, p := range posts {
		var n int
		if _, err := fmt.Sscanf(p.Text, "%d alerts", &n); err != nil {
			t.Fatalf("post %q is not the digest template's", p.Text)
		}
		members += n
	}
	if members != alerts {
		t.Errorf("the posts list %d members, want %d, each once", members, alerts)
	}
	var digests int
	if err := pool.QueryRow(context.Background(), "SELECT count(DISTINCT digest_id) FROM (SELECT digest_id FROM "+d.schema+".messages WHERE sink = 'ops-slack' UNION ALL SELECT digest_id FROM "+d.schema+".messages_history WHERE sink = 'ops-slack') m").Scan(&digests); err != nil {
		t.Fatal(err)
	}
	if digests != len(posts) {
		t.Errorf("%d digests recorded for %d posts", digests, len(posts))
	}
}
