package console_test

import (
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/server/console"
)

// groupRow is one line of the dead letters grouped by error: sink, last
// error, count.
var groupRow = regexp.MustCompile(`(?s)<tr>\s*<td>([^<]*)</td>\s*<td class="err"><a href="([^"]*)">([^<]*)</a></td>\s*<td class="n">(\d+)</td>`)

// Dead letters grouped by error (?group=error): one line per sink and
// last error with its count, the largest groups first, of one sink when
// filtered; each line links to its letters, and the list links to the
// grouping.
// (Mutations, each failing this test: getDeadLetters without its
// group=error branch (the page is the list); dead_letter_groups.sql
// ordered by sink before the count; the group's link without its error.)
func TestDeadLettersGroupedByError(t *testing.T) {
	s := newSite(t, console.Options{Sinks: []console.Sink{{Name: "partner", Type: "webhook"}, {Name: "other", Type: "webhook"}}})
	s.dead(t, "HTTP 503 Service Unavailable", "HTTP 400 Bad Request", "HTTP 503 Service Unavailable")
	if _, err := s.pool.Exec(s.ctx, "INSERT INTO "+s.ob.Schema()+`.messages (sink, dedup_key, payload, status, attempts, last_error)
		VALUES ('other', 'o-1', '{}', 'dead', 2, 'dial tcp: i/o timeout')`); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	if _, list := b.Get("/dead-letters"); !strings.Contains(list, `name="group" value="error"`) {
		t.Error("the dead letters page offers no grouping by error")
	}
	resp, page := b.Get("/dead-letters?group=error")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="dead-letter-groups"`) {
		t.Fatalf("GET /dead-letters?group=error: %d\n%s", resp.StatusCode, page)
	}
	var got []string
	links := map[string]string{}
	for _, m := range groupRow.FindAllStringSubmatch(page, -1) {
		got = append(got, m[1]+" | "+html.UnescapeString(m[3])+" | "+m[4])
		links[m[1]+" | "+html.UnescapeString(m[3])] = html.UnescapeString(m[2])
	}
	want := []string{"partner | HTTP 503 Service Unavailable | 2", "other | dial tcp: i/o timeout | 1", "partner | HTTP 400 Bad Request | 1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("groups:\n%s\nwant, the largest first:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A group's link lists exactly its letters.
	_, letters := b.Get(links["partner | HTTP 503 Service Unavailable"])
	if n := strings.Count(letters, `name="ids"`); n != 2 {
		t.Errorf("the 503 group's link %q lists %d dead letters, want 2", links["partner | HTTP 503 Service Unavailable"], n)
	}
	// Filtered by sink, only that sink's groups.
	_, page = b.Get("/dead-letters?group=error&sink=other")
	if m := groupRow.FindAllStringSubmatch(page, -1); len(m) != 1 || m[0][1] != "other" {
		t.Errorf("groups of sink other: %d lines\n%s", len(m), page)
	}
}

// A sink no relay here is configured with that still has a recorded pause
// (a typo's) gets "Remove stale pause" on the overview for the operate
// role only; removing it deletes the pause for the cluster, records who
// did in the audit trail, and the sink leaves the overview. A configured
// sink cannot be forgotten, and a forgotten one has nothing left to
// remove.
// (Mutations, each failing this test: overview.html offering the form
// without CanOperate, or not at all; the forget route without
// allow(RoleOperate); postForget passing configured = false for every
// sink; postForget not invalidating the overview.)
func TestStalePauseIsRemovedFromTheConsole(t *testing.T) {
	tokens := access.New([]access.Token{
		access.TokenOf("ops", "ops-token", access.RoleOperate),
		access.TokenOf("viewer", "viewer-token", access.RoleRead),
	}, nil)
	s := newSite(t, console.Options{Access: tokens})
	if _, err := s.ob.PauseSink(s.ctx, s.pool, testdb.Actor, "partnr", operator.Pause{By: "erin", Reason: "typo"}); err != nil {
		t.Fatal(err)
	}
	const form = `action="/sinks/partnr/forget"`

	viewer := s.browser(t)
	viewer.SignIn("viewer-token")
	_, page := viewer.Get("/")
	if !strings.Contains(page, `data-sink="partnr"`) || strings.Contains(page, form) {
		t.Errorf("a read token's overview: the stale sink listed %v, its removal offered %v",
			strings.Contains(page, `data-sink="partnr"`), strings.Contains(page, form))
	}
	if resp, _ := viewer.Post("/sinks/partnr/forget", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read token removing the pause: %d, want 403", resp.StatusCode)
	}

	ops := s.browser(t)
	ops.SignIn("ops-token")
	_, page = ops.Get("/")
	if !strings.Contains(page, form) || !strings.Contains(page, "Remove stale pause") {
		t.Fatalf("the operator's overview offers no removal of the stale pause:\n%s", page)
	}
	if strings.Contains(page, `action="/sinks/partner/forget"`) {
		t.Error("the overview offers to remove the configured sink partner's state")
	}
	if resp, _ := ops.Post("/sinks/partner/forget", url.Values{}); resp.StatusCode != http.StatusConflict {
		t.Errorf("forgetting the configured sink partner: %d, want 409", resp.StatusCode)
	}
	states, err := s.ob.SinkStates(s.ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	if !states["partnr"].Paused() {
		t.Fatal("a refused removal removed the pause")
	}
	if resp, _ := ops.Post("/sinks/partnr/forget", url.Values{}); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("remove stale pause: %d to %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	if states, _ = s.ob.SinkStates(s.ctx, s.pool); states["partnr"].Paused() || states["partnr"].ChangedBy != "" {
		t.Errorf("after the removal: %+v, want no state", states["partnr"])
	}
	if _, page = ops.Get("/"); strings.Contains(page, `data-sink="partnr"`) {
		t.Error("the overview still lists the forgotten sink")
	}
	entries, err := s.ob.Audit().List(s.ctx, s.pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	forgot := 0
	for _, e := range entries {
		if e.Action == audit.ActionForget && e.Sink == "partnr" && e.Actor == "ops" {
			forgot++
		}
	}
	if forgot != 1 {
		t.Errorf("audit trail: %d forget entries of partnr by ops, want 1: %+v", forgot, entries)
	}
	if resp, _ := ops.Post("/sinks/partnr/forget", url.Values{}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("removing it again: %d, want 404", resp.StatusCode)
	}
}

// attemptRow is one failed attempt of the message page: its number and
// error.
var attemptRow = regexp.MustCompile(`<tr><td class="n">(\d+)</td><td class="when">[^<]*</td><td><pre class="err">([^<]*)</pre></td><td class="attempt">.*?</td></tr>`)

// A message's failed attempts read in the order they failed, also after a
// redrive from its page restarted their count: a relay fails it twice,
// it dies, it is redriven and fails twice more; a row between the two
// runs marks the redrive.
// (Mutations, each failing this test: message.sql aggregating the
// attempts ORDER BY a.attempt, a.failed_at (1, 1, 2, 2); redrives()
// marking no attempt, or every attempt numbered 1.)
func TestAttemptsReadInOrderAfterARedrive(t *testing.T) {
	s := newSite(t, console.Options{})
	var failures atomic.Int64
	rec := coretest.NewRecordingSink()
	rec.Fail = func(*sink.Delivery) error { return fmt.Errorf("failure %d", failures.Add(1)) }
	signals := testrelay.Run(t, s.pool, s.ob.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Sinks: []relay.SinkConfig{{Name: "partner", Type: "webhook", Sink: rec, MaxAttempts: 2,
			Backoff: relay.Backoff{Initial: time.Millisecond, Max: time.Millisecond}, CircuitBreaker: relay.CircuitBreaker{Disabled: true}}}})
	res, err := s.ob.Enqueue(s.ctx, s.pool, outboxd.Message{Sink: "partner", DedupKey: "k", Payload: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	deaths := func(n int) func([]relaysignal.Outcome) bool {
		return func(all []relaysignal.Outcome) bool {
			dead := 0
			for _, o := range all {
				if o.ID == res.ID && o.Status == "dead" && o.Written {
					dead++
				}
			}
			return dead >= n
		}
	}
	signals.Written.Wait(t, 30*time.Second, "the message to die", deaths(1))

	b := s.browser(t)
	path := fmt.Sprintf("/messages/%d", res.ID)
	_, page := b.Get(path)
	if !strings.Contains(page, `id="redrive"`) {
		t.Fatalf("the dead message's page has no redrive:\n%s", page)
	}
	_, confirm := b.Post("/dead-letters/confirm", url.Values{"do": {"redrive-selected"}, "ids": {fmt.Sprint(res.ID)}})
	if _, done := b.Post("/dead-letters/apply", confirmForm(confirm)); !strings.Contains(done, `<span id="done-count">1</span>`) {
		t.Fatalf("redrive:\n%s", done)
	}
	signals.Written.Wait(t, 30*time.Second, "the redriven message to die again", deaths(2))

	_, page = b.Get(path)
	var got []string
	for _, m := range attemptRow.FindAllStringSubmatch(page, -1) {
		got = append(got, m[1]+": "+m[2])
	}
	want := []string{"1: failure 1", "2: failure 2", "1: failure 3", "2: failure 4"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("failed attempts on the message page: %q, want in the order they failed %q", got, want)
	}
	// The redrive between them is marked, once, where the count restarts.
	if marks := redriveMark.FindAllStringIndex(page, -1); len(marks) != 1 ||
		!strings.Contains(page[:marks[0][0]], "failure 2") || strings.Contains(page[:marks[0][0]], "failure 3") {
		t.Errorf("the attempts mark the redrive %d times, want once between failure 2 and failure 3:\n%s", len(marks), page)
	}
}

// redriveMark is the row of a message's attempts that marks a redrive.
var redriveMark = regexp.MustCompile(`<tr class="redriven">`)

// when is a time as the console's pages write one.
var when = regexp.MustCompile(`\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})?Z`)

// Times keep to one line: every time a page writes is in an element of
// class "when", which the stylesheet keeps from wrapping, and a time of
// another day in the overview's state joins its date and time with a
// no-break space.
// (Mutations, each failing this test: a template writing a time without
// class="when" (message.html's failed attempts); console.css without
// white-space: nowrap for .when; clock() joining date and time with a
// plain space.)
func TestTimesStayOnOneLine(t *testing.T) {
	s := newSite(t, console.Options{})
	id := s.dead(t, "HTTP 503")[0]
	if _, err := s.pool.Exec(s.ctx, "INSERT INTO "+s.ob.Schema()+".failed_attempts (message_id, attempt, error) VALUES ($1, 1, 'HTTP 503'), ($1, 2, 'HTTP 503')", id); err != nil {
		t.Fatal(err)
	}
	until, err := s.ob.PauseSink(s.ctx, s.pool, testdb.Actor, "partner", operator.Pause{For: 72 * time.Hour, By: "erin", Reason: "maintenance"})
	if err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	_, css := b.Get("/static/console.css")
	if !regexp.MustCompile(`(?m)^\.when\s*\{[^}]*white-space:\s*nowrap`).MatchString(css) {
		t.Errorf("console.css does not keep .when on one line:\n%s", css)
	}
	for _, path := range []string{fmt.Sprintf("/messages/%d", id), "/messages?sink=partner", "/dead-letters", "/dead-letters?group=error", "/audit"} {
		resp, page := b.Get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		times := when.FindAllStringIndex(page, -1)
		if len(times) == 0 {
			t.Errorf("GET %s shows no time", path)
		}
		for _, at := range times {
			if !strings.HasSuffix(page[:at[0]], `class="when">`) {
				t.Errorf("GET %s: %s is not in a class=\"when\" element: …%s", path, page[at[0]:at[1]], page[max(0, at[0]-60):at[1]])
			}
		}
	}
	_, page := b.Get("/")
	u := until.UTC()
	want := "paused until " + u.Format("2006-01-02") + "\u00a0" + u.Format("15:04Z")
	if !strings.Contains(page, want) {
		t.Errorf("the overview does not show the pause as %q:\n%s", want, page)
	}
	if strings.Contains(page, u.Format("2006-01-02")+" ") {
		t.Error("the overview breaks a time after its date")
	}
}
