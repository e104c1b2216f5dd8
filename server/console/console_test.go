package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/internal/testkit/consoletest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/server/console"
)

const token = "console-test-token"

// adminToken is the console's one token, an admin's, as http.token gives.
func adminToken() *access.Authenticator {
	return access.New([]access.Token{access.TokenOf(access.LegacyTokenName, token, access.RoleAdmin)}, nil)
}

// site is a console on a fresh outbox, served by httptest.
type site struct {
	srv  *httptest.Server
	ui   *console.Console
	pool *pgxpool.Pool
	ob   *testdb.Outbox
	ctx  context.Context
}

// newSite serves a console of opt on a fresh outbox; each setup
// completes opt for that outbox first.
func newSite(t *testing.T, opt console.Options, setups ...func(*console.Options, *testdb.Outbox)) *site {
	t.Helper()
	t.Parallel()
	pool, ob := testdb.New(t)
	opt.Operator, opt.DB, opt.Logger = ob.Operator, pool, slog.New(slog.DiscardHandler)
	if opt.Sinks == nil {
		opt.Sinks = []console.Sink{{Name: "partner", Type: "webhook", RateLimit: "5 per 1s, burst 1"}}
	}
	for _, setup := range setups {
		setup(&opt, ob)
	}
	ui, err := console.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	t.Cleanup(func() { ui.Close(); srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &site{srv: srv, ui: ui, pool: pool, ob: ob, ctx: ctx}
}

func (s *site) browser(t *testing.T) *consoletest.Browser {
	return consoletest.New(t, s.srv.URL)
}

// With a token, nothing is shown before signing in with it; the session
// cookie is HttpOnly, SameSite=Strict, Secure over TLS, holds no token,
// and is refused when forged, stretched or expired, and after signing out.
// (Mutations, each failing this test: signedIn always true; require
// leaving /overview/ open besides /signin and /static/; session()
// skipping the MAC check or the expiry check; the cookie without HttpOnly,
// with SameSite=Lax, without Secure behind a TLS proxy; sign-out keeping
// the cookie.)
func TestSignInWithTheTokenSetsAStrictSessionCookie(t *testing.T) {
	s := newSite(t, console.Options{Access: adminToken()})
	b := s.browser(t)
	resp, _ := b.Get("/dead-letters?sink=partner")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next="+url.QueryEscape("/dead-letters?sink=partner") {
		t.Fatalf("not signed in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Headers only: an event stream served would never end.
	noRedirects := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/", "/overview/events", "/messages", "/messages/1", "/dead-letters"} {
		resp, err := noRedirects.Get(s.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?") {
			t.Errorf("GET %s before signing in: %d to %q, want a redirect to sign in", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp, _ := b.Post("/sinks/partner/pause", url.Values{}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a form before signing in: %d, want 401", resp.StatusCode)
	}
	b.Get("/signin")
	resp, body := b.Post("/signin", url.Values{"token": {"guess"}, "next": {"/"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not a token") || len(b.Cookies) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, b.Cookies)
	}
	resp, _ = b.Post("/signin", url.Values{"token": {token}, "next": {"//evil.example/"}})
	c := b.Cookies[console.SessionCookie]
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || c == nil {
		t.Fatalf("right token: %d to %q, cookie %v", resp.StatusCode, resp.Header.Get("Location"), c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || strings.Contains(c.Value, token) {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, without the token", c)
	}
	if resp, _ := b.Get("/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: %d", resp.StatusCode)
	}

	// A forged or stretched session is refused.
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		t.Fatalf("session %q: want name.expiry.mac", c.Value)
	}
	name, exp, mac := parts[0], parts[1], parts[2]
	for _, forged := range []string{name + ".9999999999." + mac, name + "." + exp + ".AAAA", "garbage",
		name + "." + fmt.Sprint(time.Now().Add(-time.Minute).Unix()) + "." + mac, "b3RoZXI." + exp + "." + mac} {
		other := s.browser(t)
		other.Cookies[console.SessionCookie] = &http.Cookie{Name: console.SessionCookie, Value: forged}
		if resp, _ := other.Get("/"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("forged session %q: %d, want a redirect to sign in", forged, resp.StatusCode)
		}
	}

	// A genuine session is refused once it has expired.
	for _, tt := range []struct {
		expiry time.Time
		want   int
	}{{time.Now().Add(time.Minute), http.StatusOK}, {time.Now().Add(-time.Second), http.StatusSeeOther}} {
		other := s.browser(t)
		other.Cookies[console.SessionCookie] = &http.Cookie{Name: console.SessionCookie, Value: console.SessionValue(s.ui, access.LegacyTokenName, tt.expiry)}
		if resp, _ := other.Get("/"); resp.StatusCode != tt.want {
			t.Errorf("a session signed until %s: %d, want %d", tt.expiry.Format(time.RFC3339), resp.StatusCode, tt.want)
		}
	}

	// Over TLS (a proxy saying so) the cookie is Secure.
	tls := s.browser(t)
	tls.Get("/signin")
	tls.Post("/signin", url.Values{"token": {token}}, "X-Forwarded-Proto", "https")
	if c := tls.Cookies[console.SessionCookie]; c == nil || !c.Secure {
		t.Errorf("cookie behind TLS: %+v, want Secure", c)
	}

	b.Get("/")
	b.Post("/signout", url.Values{})
	if resp, _ := b.Get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after sign-out: %d, want a redirect to sign in", resp.StatusCode)
	}
}

// Every form needs the CSRF token of its page, and no request from
// another site changes anything, with or without a token.
// (Mutations, each failing this test: require without checkCSRF; routes
// without the CrossOriginProtection guard.)
func TestFormsRefuseCrossSiteRequests(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]console.Options{"with a token": {Access: adminToken()}, "without": {}} {
		t.Run(name, func(t *testing.T) { checkFormsRefuseCrossSiteRequests(t, opt) })
	}
}

func checkFormsRefuseCrossSiteRequests(t *testing.T, opt console.Options) {
	s := newSite(t, opt)
	b := s.browser(t)
	if opt.Access != nil {
		b.SignIn(token)
	}
	b.Get("/")
	valid := b.CSRF
	for name, c := range map[string]struct {
		csrf   string
		header []string
	}{
		"no token":                {"", nil},
		"wrong token":             {"AAAA", nil},
		"token, but another site": {valid, []string{"Sec-Fetch-Site", "cross-site"}},
		"token, foreign origin":   {valid, []string{"Origin", "https://evil.example"}},
	} {
		resp, body := b.Post("/sinks/partner/pause", url.Values{"csrf": {c.csrf}}, c.header...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("token %v, %s: %d, want 403", opt.Access != nil, name, resp.StatusCode)
		}
		if !strings.Contains(body, "refused") && !strings.Contains(body, "CSRF") {
			t.Errorf("%s: the refusal does not say why: %s", name, body)
		}
	}
	states, _ := s.ob.SinkStates(s.ctx, s.pool)
	if states["partner"].Paused() {
		t.Fatal("a refused form paused the sink")
	}
	if resp, _ := b.Post("/sinks/partner/pause", url.Values{"csrf": {valid}, "by": {"erin"}, "reason": {"test"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("token %v, valid form: %d, want 303", opt.Access != nil, resp.StatusCode)
	}
	states, _ = s.ob.SinkStates(s.ctx, s.pool)
	want := "erin" // signed in, who signed in is recorded beside it
	if opt.Access != nil {
		want = "erin (admin)"
	}
	if st := states["partner"]; !st.Paused() || st.ChangedBy != want {
		t.Errorf("after a valid pause: %+v", st)
	}
}

// Redrive and purge go through a dry-run count and a confirmation page;
// the confirmation acts on the rows counted, not on rows that died since.
// An older row that dies after the count (failed when counted) is left
// too, and a confirmation whose counted rows changed shows the new count
// and changes nothing. Numeric form values and the list's cursor are
// parsed strictly.
// (Mutations, each failing this test: postConfirm not keeping the count's
// token, postConfirm acting instead of counting, postApply not asking
// for the confirmation, purge.sql without the @dead_until bound,
// getDeadLetters reading a malformed after as 0.)
func TestDeadLetterActionsCountFirstAndActOnWhatWasCounted(t *testing.T) {
	s := newSite(t, console.Options{})
	ids := s.dead(t, "503", "503", "400")
	older := s.dead(t, "503")[0]
	if _, err := s.pool.Exec(s.ctx, "UPDATE "+s.ob.Schema()+".messages SET status = 'failed' WHERE id = $1", older); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	_, page := b.Get("/dead-letters?sink=partner&error=503")
	if strings.Count(page, `name="ids"`) != 2 {
		t.Fatalf("filtered list:\n%s", page)
	}
	resp, confirm := b.Post("/dead-letters/confirm", url.Values{"do": {"purge-matching"}, "sink": {"partner"}, "error": {"503"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(confirm, `<strong id="count">2</strong>`) {
		t.Fatalf("confirmation: %d\n%s", resp.StatusCode, confirm)
	}
	if n := s.count(t, "dead"); n != 3 {
		t.Fatalf("the dry run changed rows: %d dead", n)
	}
	late := s.dead(t, "503")[0] // dies between the count and the confirmation
	if _, err := s.pool.Exec(s.ctx, "UPDATE "+s.ob.Schema()+".messages SET status = 'dead', updated_at = now() WHERE id = $1", older); err != nil {
		t.Fatal(err) // and so does the older one
	}
	form := confirmForm(confirm)
	_, done := b.Post("/dead-letters/apply", form)
	if !strings.Contains(done, `<span id="done-count">2</span>`) {
		t.Fatalf("apply:\n%s", done)
	}
	for _, id := range []int64{late, older} {
		if _, err := s.ob.Message(s.ctx, s.pool, id); err != nil {
			t.Errorf("dead letter %d, which died after the count, was purged too: %v", id, err)
		}
	}
	// The same confirmation again: its rows are gone, the selection changed.
	resp, again := b.Post("/dead-letters/apply", form)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(again, `id="changed"`) || !strings.Contains(again, `<strong id="count">2</strong>`) {
		t.Fatalf("a stale confirmation: %d\n%s", resp.StatusCode, again)
	}
	if n := s.count(t, "dead"); n != 3 {
		t.Fatalf("a stale confirmation changed rows: %d dead", n)
	}
	for _, bad := range []url.Values{{"up_to_id": {"x"}}, {"up_to_id": {"3"}}, {"token": {"x"}}} {
		f := confirmForm(confirm)
		for k, v := range bad {
			f[k] = v
		}
		if resp, _ := b.Post("/dead-letters/apply", f); resp.StatusCode != http.StatusBadRequest || s.count(t, "dead") != 3 {
			t.Errorf("apply with %v: %d, want 400 and nothing changed", bad, resp.StatusCode)
		}
	}
	if resp, _ := b.Get("/dead-letters?after=x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed cursor: %d, want 400", resp.StatusCode)
	}

	_, confirm = b.Post("/dead-letters/confirm", url.Values{"do": {"redrive-selected"}, "ids": {fmt.Sprint(ids[2]), "999999"}})
	if !strings.Contains(confirm, `<strong id="count">1</strong>`) || !strings.Contains(confirm, "No dead letter with id 999999") {
		t.Fatalf("selection with an unknown id:\n%s", confirm)
	}
	if resp, _ := b.Post("/dead-letters/apply", url.Values{"do": {"redrive-selected"}, "ids": {fmt.Sprint(ids[2])}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("apply without the confirmation: %d, want 400", resp.StatusCode)
	}
	_, done = b.Post("/dead-letters/apply", confirmForm(confirm))
	if !strings.Contains(done, `<span id="done-count">1</span>`) || s.count(t, "pending") != 1 {
		t.Fatalf("redrive of one:\n%s", done)
	}
	for _, form := range []url.Values{{"do": {"delete-selected"}}, {"do": {"purge-selected"}}, {"do": {"purge-selected"}, "ids": {"x"}}} {
		if resp, _ := b.Post("/dead-letters/confirm", form); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("confirm %v: %d, want 400", form, resp.StatusCode)
		}
	}
}

// confirmForm is the form of a confirmation page.
func confirmForm(page string) url.Values {
	form := url.Values{}
	for _, m := range regexp.MustCompile(`name="(do|sink|error|ids|token|confirm)" value="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		form.Add(m[1], html.UnescapeString(m[2]))
	}
	return form
}

// Text from producers and receivers is shown as text: markup in a payload,
// a dedup key or an error never becomes markup of the page.
// (Mutations, each failing this test: render.go with text/template instead
// of html/template; securityHeaders without the Content-Security-Policy.)
func TestPagesEscapeStoredText(t *testing.T) {
	s := newSite(t, console.Options{TraceURL: "http://jaeger.example/trace/{trace_id}"})
	const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(s.ctx, "produce")
	res, err := s.ob.Enqueue(ctx, s.pool, outboxd.Message{Sink: "partner", DedupKey: "k" + evil, Payload: map[string]string{"note": evil},
		Headers: map[string]string{"x-note": evil}})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(s.ctx, "UPDATE "+s.ob.Schema()+".messages SET status = 'dead', last_error = $1 WHERE id = $2", evil, res.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.ob.RefreshStatsSnapshot(s.ctx, s.pool, "test"); err != nil {
		t.Fatal(err)
	}
	b := s.browser(t)
	for _, path := range []string{"/", fmt.Sprintf("/messages/%d", res.ID), "/messages?sink=partner", "/dead-letters", "/messages?key=" + url.QueryEscape(evil)} {
		resp, body := b.Get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("GET %s has the stored markup unescaped", path)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	_, detail := b.Get(fmt.Sprintf("/messages/%d", res.ID))
	traceID := span.SpanContext().TraceID().String()
	if !strings.Contains(detail, `href="http://jaeger.example/trace/`+traceID+`"`) {
		t.Errorf("no trace link to %s in the message page", traceID)
	}
}

// The overview streams as server-sent events; Close ends the streams.
func TestOverviewStreamsAndCloseEndsTheStreams(t *testing.T) {
	s := newSite(t, console.Options{Refresh: 50 * time.Millisecond})
	s.dead(t, "boom")
	if err := s.ob.RefreshStatsSnapshot(s.ctx, s.pool, "test"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.srv.URL + "/overview/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	var event struct {
		Rows []struct {
			Sink  string            `json:"sink"`
			Cells map[string]string `json:"cells"`
		} `json:"rows"`
	}
	for lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &event); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if len(event.Rows) != 1 || event.Rows[0].Sink != "partner" || event.Rows[0].Cells["dead"] != "1" {
		t.Fatalf("event = %+v", event)
	}
	ended := make(chan struct{})
	go func() {
		for lines.Scan() {
		}
		close(ended)
	}()
	s.ui.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end when the console closed")
	}
}

// dead inserts dead letters of sink partner with the given last errors.
func (s *site) dead(t *testing.T, errs ...string) []int64 {
	t.Helper()
	var ids []int64
	for _, e := range errs {
		var id int64
		err := s.pool.QueryRow(s.ctx, "INSERT INTO "+s.ob.Schema()+`.messages (sink, dedup_key, payload, status, attempts, last_error)
			VALUES ('partner', gen_random_uuid()::text, '{"n": 1}', 'dead', 2, $1) RETURNING id`, e).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func (s *site) count(t *testing.T, status string) int {
	return testdb.StatusCounts(t, s.pool, s.ob, "")[status]
}
