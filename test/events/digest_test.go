package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
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

// mixedDigestConfig sends two routes to the same Slack sink, at Slack's
// one post per second per channel: alerts are digested (their digest
// template lists the members), notices have no digest and go out one post
// each.
const mixedDigestConfig = `database:
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
    sample: {type: alert.fired, data: {service: api, n: 1}}
    to:
      - sink: ops-slack
        template: {text: "alert {{.data.n}}"}
        digest:
          window: 3s
          max_messages: 50
          template: {text: "{{len .messages}} alerts:{{range .messages}} {{.data.n}}{{end}}"}
  notices:
    events: [notice.posted]
    sample: {type: notice.posted, data: {n: 1}}
    to:
      - sink: ops-slack
        template: {text: "notice {{.data.n}}"}
`

// The real binary, already serving, under a burst published through its
// HTTP API: a digested route's alerts arrive in a handful of posts, each
// alert in exactly one, while another route to the same Slack sink, with
// no digest, has each of its events posted alone; every row is sent once.
// A member's lookup, over the API and with `outboxd get`, names its digest
// and its siblings; an undigested row's names none.
// (Mutation checked: reverting 0393972's fix in core/relay/digest.go, so
// the digest loop keys the notices by their nil digest policy, panics the
// relay: serve exits and this test fails at once; writeMessage in cmd not
// printing the digest fails it at the lookup.)
func TestSlackDigestBesideAnUndigestedRouteUnderABurstWhileServing(t *testing.T) {
	t.Parallel()
	d := deploy(t)
	d.config = filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(d.config, []byte(mixedDigestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	d.mustOutboxd("migrate")
	d.serve()

	// The burst: alerts with a notice every 20, posted by 4 clients at once.
	const alerts, noticeEvery = 120, 20
	var events []string
	notices := 0
	for i := range alerts {
		events = append(events, fmt.Sprintf(`{"type":"alert.fired","key":"a-%d","data":{"service":"api","n":%d}}`, i, i))
		if i%noticeEvery == noticeEvery-1 {
			events = append(events, fmt.Sprintf(`{"type":"notice.posted","key":"n-%d","data":{"n":%d}}`, notices, notices))
			notices++
		}
	}
	d.burst(events, 4)

	pool := testdb.Pool(t, 1)
	// all is every row, delivered or not, with its digest (messages_all
	// predates digests).
	all := "(SELECT id, route, status, digest_id FROM {schema}.messages UNION ALL SELECT id, route, 'sent', digest_id FROM {schema}.messages_history)"
	expand := func(query string) string {
		return strings.ReplaceAll(strings.ReplaceAll(query, "{all}", all), "{schema}", d.schema)
	}
	count := func(query string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), expand(query)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testrelay.WaitFor(t, 90*time.Second, "every row sent", func() bool {
		if d.server.Exited() {
			t.Fatalf("outboxd serve exited during the burst:\n%s", d.server.Logs())
		}
		return count("SELECT count(*) FROM {all} m WHERE status = 'sent'") == alerts+notices
	})
	if n := count("SELECT count(*) FROM {all} m"); n != alerts+notices {
		t.Fatalf("%d rows, want %d", n, alerts+notices)
	}

	seenAlert, seenNotice := map[int]int{}, map[int]int{}
	digestPosts := 0
	for _, p := range d.slack.Posts() {
		var n int
		if _, err := fmt.Sscanf(p.Text, "notice %d", &n); err == nil {
			seenNotice[n]++
			continue
		}
		head, list, ok := strings.Cut(p.Text, " alerts:")
		var size int
		if _, err := fmt.Sscanf(head, "%d", &size); !ok || err != nil {
			t.Fatalf("post %q is neither a notice nor the alerts' digest", p.Text)
		}
		members := strings.Fields(list)
		if len(members) != size || size > 50 {
			t.Errorf("post %q lists %d members, says %d (at most 50)", p.Text, len(members), size)
		}
		for _, m := range members {
			var n int
			if _, err := fmt.Sscanf(m, "%d", &n); err != nil {
				t.Fatalf("post %q lists %q", p.Text, m)
			}
			seenAlert[n]++
		}
		digestPosts++
	}
	t.Logf("%d alerts in %d digest posts, %d notices posted alone", alerts, digestPosts, notices)
	for i := range alerts {
		if seenAlert[i] != 1 {
			t.Errorf("alert %d is in %d posts, want 1", i, seenAlert[i])
		}
	}
	for i := range notices {
		if seenNotice[i] != 1 {
			t.Errorf("notice %d posted %d times, want once, alone", i, seenNotice[i])
		}
	}
	if len(seenAlert) != alerts || len(seenNotice) != notices {
		t.Errorf("posts list %d alerts and %d notices, want %d and %d", len(seenAlert), len(seenNotice), alerts, notices)
	}
	// 120 alerts in digests of at most 50 are at least 3 posts; a burst
	// that outlasts a window opens another.
	if digestPosts < 3 || digestPosts > 12 {
		t.Errorf("%d digest posts for %d alerts, want a handful (3 to 12)", digestPosts, alerts)
	}
	if n := count("SELECT count(DISTINCT digest_id) FROM {all} m WHERE route = 'alerts'"); n != digestPosts {
		t.Errorf("%d digests recorded for %d digest posts", n, digestPosts)
	}
	if n := count("SELECT count(*) FROM {all} m WHERE (route = 'alerts') = (digest_id IS NULL)"); n != 0 {
		t.Errorf("%d rows with a digest where there is none, or none where there is one", n)
	}

	// The lookup of an alert names its digest and siblings, as recorded.
	var id, digestID int64
	var key string
	var siblings []int64
	if err := pool.QueryRow(context.Background(), expand(`SELECT m.id, m.digest_id, d.key,
		ARRAY(SELECT s.id FROM {all} s WHERE s.digest_id = m.digest_id AND s.id <> m.id ORDER BY s.id)
		FROM {all} m JOIN {schema}.digests d ON d.id = m.digest_id
		WHERE m.route = 'alerts' ORDER BY m.id LIMIT 1`)).Scan(&id, &digestID, &key, &siblings); err != nil {
		t.Fatal(err)
	}
	deliveryID := fmt.Sprintf("ops-slack/digest-%d", digestID)
	var report struct {
		Digest *struct {
			ID         int64      `json:"id"`
			DeliveryID string     `json:"delivery_id"`
			Key        string     `json:"key"`
			SentAt     *time.Time `json:"sent_at"`
			Siblings   []int64    `json:"siblings"`
		} `json:"digest"`
	}
	d.getJSON(fmt.Sprintf("/v1/messages/%d", id), &report)
	if g := report.Digest; g == nil || g.ID != digestID || g.DeliveryID != deliveryID || g.Key != key || g.SentAt == nil ||
		!slices.Equal(g.Siblings, siblings) {
		t.Errorf("GET /v1/messages/%d digest %+v, want digest %d (%s, key %s), sent, siblings %v", id, g, digestID, deliveryID, key, siblings)
	}
	out := d.mustOutboxd("get", fmt.Sprint(id))
	siblingList := strings.Trim(fmt.Sprint(siblings), "[]")
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^digest +%d \(%s, key %s, %d other members\)$`, digestID, regexp.QuoteMeta(deliveryID), regexp.QuoteMeta(key), len(siblings))).MatchString(out) ||
		!regexp.MustCompile(`(?m)^siblings +`+siblingList+`$`).MatchString(out) {
		t.Errorf("outboxd get %d does not name digest %d and its siblings %v:\n%s", id, digestID, siblings, out)
	}
	var notice int64
	if err := pool.QueryRow(context.Background(), "SELECT id FROM "+d.schema+".messages_all WHERE route = 'notices' LIMIT 1").Scan(&notice); err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	d.getJSON(fmt.Sprintf("/v1/messages/%d", notice), &raw)
	if _, has := raw["digest"]; has || raw["id"] == nil {
		t.Errorf("GET /v1/messages/%d of a notice: %v, want the row without a digest", notice, raw)
	}
	if out := d.mustOutboxd("get", fmt.Sprint(notice)); regexp.MustCompile(`(?m)^(digest|siblings) `).MatchString(out) {
		t.Errorf("outboxd get %d of a notice names a digest:\n%s", notice, out)
	}
}

// burst posts events to the HTTP API from clients at once, and fails the
// test unless each creates its row.
func (d *deployment) burst(events []string, clients int) {
	d.t.Helper()
	next := make(chan string)
	errs := make(chan error, len(events))
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for body := range next {
				if d.server.Exited() {
					errs <- errors.New("outboxd serve exited")
					continue
				}
				resp, err := http.Post("http://"+d.server.Addr()+"/v1/events", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("POST /v1/events %s: %s %s", body, resp.Status, answer)
				}
			}
		})
	}
	for _, e := range events {
		next <- e
	}
	close(next)
	wg.Wait()
	close(errs)
	if n := len(errs); n > 0 {
		d.t.Fatalf("%d of %d events not published, the first: %v\nserve's log:\n%s", n, len(events), <-errs, d.server.Logs())
	}
}

// getJSON gets path from the served HTTP API and decodes its 200 answer
// into out.
func (d *deployment) getJSON(path string, out any) {
	d.t.Helper()
	resp, err := http.Get("http://" + d.server.Addr() + path)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %s %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		d.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}
