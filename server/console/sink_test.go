package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
)

// sinksTable is the overview's table; sinksHead its header row and
// sinksRow a sink's row.
var (
	sinksHead = regexp.MustCompile(`(?s)<thead>\s*<tr>(.*?)</tr>\s*</thead>`)
	sinksRow  = regexp.MustCompile(`(?s)<tr data-sink="partner"[^>]*>(.*?)</tr>`)
	cellTag   = regexp.MustCompile(`<t[hd][ >]`)
	headCell  = regexp.MustCompile(`<th[^>]*>([^<]*)</th>`)
)

// The overview's columns agree with each other and with their headers:
// every column has a header (the actions' too), so the borders line up;
// a zero is never marked as a failure, only the cells with something
// failing are; the dead letters now and the deaths of the last window
// are told apart in words (a letter redriven and dead again died twice,
// a purged one died but is no letter now); a sink's name opens its page.
// (Mutations, each failing this test: the actions' header left empty;
// overview.html marking the whole row as failing again (class "bad" on
// the zeros); the window's column back to "14 dead"; the sink's link
// back to /messages?sink=; console.css's .actions rule (the destination
// page's flex box) matching the overview's actions cell, which then left
// the table's grid.)
func TestOverviewColumnsAgreeAndZerosAreNotFailures(t *testing.T) {
	s := newSite(t, console.Options{})
	s.dead(t, "HTTP 500: boom")
	// Four deaths in the window: the letter above, and three since
	// redriven, purged or dead again (the per-minute tallies count
	// attempts, not letters).
	if _, err := s.pool.Exec(s.ctx, "INSERT INTO "+s.ob.Schema()+".delivery_minutes (sink, minute, sent, retried, dead, latency_buckets) "+
		"VALUES ('partner', date_trunc('minute', now()), 0, 0, 4, '{}')"); err != nil {
		t.Fatal(err)
	}
	if err := s.ob.RefreshStatsSnapshot(s.ctx, s.pool, "test"); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	_, page := b.Get("/")
	head, row := sinksHead.FindStringSubmatch(page), sinksRow.FindStringSubmatch(page)
	if head == nil || row == nil {
		t.Fatalf("no header or no partner row:\n%s", page)
	}
	if h, r := len(cellTag.FindAllString(head[1], -1)), len(cellTag.FindAllString(row[1], -1)); h != r {
		t.Errorf("the header has %d columns, the row %d", h, r)
	}
	for _, th := range headCell.FindAllStringSubmatch(head[1], -1) {
		if strings.TrimSpace(th[1]) == "" {
			t.Errorf("a column without a header: %s", th[0])
		}
	}
	for _, want := range []string{`<a href="/sinks/partner">partner</a>`, "Dead now", "0 retried, 4 died",
		`<a href="/dead-letters?sink=partner" class="bad" data-cell="dead">1</a>`, `<td class="n" data-cell="failed">0</td>`, `<td class="bad" data-cell="errors">0 retried, 4 died</td>`} {
		if !strings.Contains(row[0]+head[0], want) {
			t.Errorf("the overview lacks %q:\n%s", want, row[0])
		}
	}
	if strings.Contains(row[0], "/messages?sink=") || strings.Contains(row[0], "4 dead") {
		t.Errorf("the row links to message search or counts deaths as dead letters:\n%s", row[0])
	}
	if regexp.MustCompile(`class="[^"]*bad[^"]*"[^>]*>0<`).MatchString(row[0]) {
		t.Errorf("a zero is marked as a failure:\n%s", row[0])
	}
	_, css := b.Get("/static/console.css")
	if regexp.MustCompile(`(?m)^\.actions\s*[{,]`).MatchString(css) {
		t.Error("console.css styles every .actions as a flex box, the overview's table cell too")
	}
}

// A sink's page says its state and why (a pause by whom, why and until;
// an open breaker since when, why, its last failure), its last error,
// its deliveries minute by minute from the per-minute tallies (only the
// span asked for), its pause and breaker history from the audit trail,
// its dead letters grouped by error with their counts, and offers the
// operate role its actions: pause and resume, and redrive or purge
// through the dry-run confirmation. A read token sees it all but the
// forms; a sink nobody knows is not found.
// (Mutations, each failing this test: timeLine dropping the minutes with
// tallies (case ok: never taken); sink_minutes.sql without its span bound
// is core/operator's TestSinkMinutesAndSinkAuditReadOneSinkOverTheirSpan's;
// sink_audit.sql without its sink condition (the other sink's pause
// shows); the page without the
// breaker section; the actions offered to the read role; the route's
// 404 for an unknown sink answering an empty page.)
func TestSinkPageShowsStateWhyHistoryDeadLettersAndActions(t *testing.T) {
	s := newSite(t, console.Options{Access: adminAndViewer(), Sinks: []console.Sink{
		{Name: "partner", Type: "webhook", RateLimit: "5 per 1s, burst 1"}, {Name: "other", Type: "webhook"}}})
	for _, q := range []string{
		"INSERT INTO {s}.delivery_minutes (sink, minute, sent, retried, dead, latency_buckets) VALUES " +
			"('partner', date_trunc('minute', now()) - interval '2 minutes', 417, 23, 3, '{}'), " +
			"('partner', date_trunc('minute', now()) - interval '3 hours', 9191, 0, 0, '{}')",
		"INSERT INTO {s}.destination_breakers (sink, reason, last_failure, probe_interval, next_probe_at) " +
			"VALUES ('partner', '5 consecutive failures (destination down)', 'HTTP 503 Service Unavailable', '5s', now() + interval '5s')",
	} {
		if _, err := s.pool.Exec(s.ctx, strings.ReplaceAll(q, "{s}", s.ob.Schema())); err != nil {
			t.Fatal(err)
		}
	}
	// The letters die after the breaker's last failure: the newest of
	// them, HTTP 410, is the sink's last error.
	s.dead(t, "HTTP 500: boom", "HTTP 500: boom", "HTTP 410: gone")
	if _, err := s.ob.PauseSink(s.ctx, s.pool, testdb.Actor, "partner", operator.Pause{For: time.Hour, By: "erin", Reason: "partner maintenance"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ob.PauseSink(s.ctx, s.pool, testdb.Actor, "other", operator.Pause{By: "mallory", Reason: "unrelated"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ob.RefreshStatsSnapshot(s.ctx, s.pool, "test"); err != nil {
		t.Fatal(err)
	}

	b := s.browser(t)
	b.SignIn(token)
	resp, page := b.Get("/sinks/partner")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sinks/partner: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{
		`id="state"`, "paused until", "by erin: partner maintenance",
		`id="breakers"`, "5 consecutive failures (destination down)", "HTTP 503 Service Unavailable",
		`id="last-error">HTTP 410: gone<`,
		`id="minutes"`, ">417<", ">23<", `<tr class="quiet">`,
		`id="history"`, ">pause<", "partner maintenance",
		`id="dead-letter-groups"`, `<td class="n">2</td>`,
		`action="/sinks/partner/pause"`, `action="/sinks/partner/resume"`,
		`action="/dead-letters/confirm"`, `value="redrive-matching"`, `value="purge-matching"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the sink's page lacks %q", want)
		}
	}
	for _, unwanted := range []string{">9191<", "mallory", "unrelated"} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the sink's page shows %q, of another span or sink", unwanted)
		}
	}
	// The page's resume comes back to the page.
	if resp, _ := b.Post("/sinks/partner/resume", url.Values{"csrf": {b.CSRF}, "back": {"sink"}}); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/sinks/partner" {
		t.Errorf("resume from the sink's page: %d to %q, want 303 to /sinks/partner", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page = b.Get("/sinks/partner"); !strings.Contains(page, ">resume<") {
		t.Error("the history lacks the resume")
	}

	viewer := s.browser(t)
	viewer.SignIn(viewerToken)
	_, page = viewer.Get("/sinks/partner")
	if !strings.Contains(page, `id="dead-letter-groups"`) || strings.Contains(page, "/sinks/partner/pause") || strings.Contains(page, "/dead-letters/confirm") {
		t.Errorf("a read token's sink page: want the data without the actions:\n%s", page)
	}
	if resp, _ := b.Get("/sinks/nosuch"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /sinks/nosuch: %d, want 404", resp.StatusCode)
	}
}
