// Package browser_test drives the operator console of a real `outboxd
// serve` in a real headless Chromium (Debian's chromium, through chromedp)
// the way an on-call engineer would: sign in, see a sink failing, open a
// dead letter, read its attempts, fix the receiver, redrive it from the
// page and watch it become sent; pause a sink and see deliveries stop,
// resume it and see them start.
//
// It is a module of its own so the browser driver stays out of outboxd's
// dependencies. With OUTBOXD_SCREENSHOTS set to a directory it also saves
// the screenshots the README shows (make screenshots).
package browser_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testenv"
)

// chromium is Debian's headless-capable browser; .ci/run installs it.
const chromium = "/usr/bin/chromium"

// screenshotsEnv names the directory the screenshots are written to.
const screenshotsEnv = "OUTBOXD_SCREENSHOTS"

// token is the API token the test signs in with.
const token = "browser-test-token"

// step bounds each wait for the page or the relay.
const step = 20 * time.Second

// receiver is a webhook endpoint that fails with a 503 while broken and
// counts what it accepts.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	broken   bool
	accepted int
}

func newReceiver(t *testing.T, broken bool) *receiver {
	r := &receiver{broken: broken}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.broken {
			http.Error(w, "partner API down for maintenance", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(15 * time.Millisecond) // a receiver takes a little time
		r.accepted++
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) set(broken bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.broken = broken
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted
}

// (Mutation: claim.sql without its pause check, with the listener ignoring
// pause notifications, fails this test: the message enqueued during the
// pause is delivered.)
func TestConsoleInARealBrowser(t *testing.T) {
	partner, audit := newReceiver(t, true), newReceiver(t, false)
	base := startOutboxd(t, partner, audit)
	for i := range 3 {
		enqueue(t, base, "partner", fmt.Sprintf("order-%d", i), fmt.Sprintf(`{"order": %d, "total": "49.90", "note": "<b>not markup</b>"}`, i))
	}
	for i := range 20 {
		enqueue(t, base, "audit", fmt.Sprintf("audit-%d", i), fmt.Sprintf(`{"event": "order.created", "order": %d}`, i))
	}

	ctx := newBrowser(t)
	p := &page{t: t, ctx: ctx}
	run, text, waitElement, waitText := p.run, p.text, p.waitElement, p.waitText
	css := func(selector string) chromedp.CSS { return chromedp.CSS(selector) }
	cell := func(sink, name string) string {
		return fmt.Sprintf(`tr[data-sink=%q] [data-cell=%q]`, sink, name)
	}

	// Sign in with the token.
	run("open the console", chromedp.Navigate(base+"/"))
	waitElement("the sign-in page", `#token`)
	run("sign in", chromedp.SendKeys(css(`#token`), token), chromedp.Click(css(`#signin`)))
	waitElement("the overview", `#overview`)
	// The overview shows the failures live, without a reload.
	waitText("partner's dead letters on the overview", cell("partner", "dead"), "3")
	waitText("partner's failures on the overview", cell("partner", "errors"), "3 died")
	waitText("audit's deliveries on the overview", cell("audit", "sent_hour"), "20")
	waitText("audit's latency on the overview", cell("audit", "p50"), "ms")
	run("a 1280 px window", chromedp.EmulateViewport(1280, 900))
	checkOverviewColumns(p, 1280)
	screenshot(t, ctx, "console-overview.png")

	// The sink's name opens its page: why it fails, minute by minute.
	run("open partner's page", chromedp.Click(css(`tr[data-sink="partner"] th a`)))
	waitElement("partner's page", `#minutes`)
	checkSinkPage(p, 1280, 3)
	screenshot(t, ctx, "console-sink.png")
	run("back to the overview", chromedp.Navigate(base+"/"))
	waitText("partner's dead letters on the overview", cell("partner", "dead"), "3")

	// Open a dead letter and read why each attempt failed.
	run("open the dead letters", chromedp.Click(css(cell("partner", "dead"))))
	waitElement("the dead letters", `#dead-letters tbody tr:first-child td:nth-child(2) a`)
	run("open a dead letter", chromedp.Click(css(`#dead-letters tbody tr:first-child td:nth-child(2) a`)))
	waitElement("the message", `#attempts`)
	// Each attempt's error names the status once; its details (HTTP 503,
	// the answer) repeat it.
	if attempts := text(`#attempts`); strings.Count(attempts, "503 Service Unavailable") != 2 || !strings.Contains(attempts, "partner API down for maintenance") {
		t.Fatalf("attempts on the page:\n%s", attempts)
	}
	if payload := text(`#payload`); !strings.Contains(payload, `"note": "<b>not markup</b>"`) {
		t.Fatalf("payload on the page:\n%s", payload)
	}
	waitElement("the trace link", `#trace`)
	sctx, cancel := context.WithTimeout(ctx, step)
	link, err := chromedp.Run(sctx, chromedp.Evaluate[string](`(() => { const e = document.querySelector("#trace"); return e === null ? "" : e.getAttribute("href"); })()`))
	cancel()
	if err != nil || !strings.HasPrefix(link, "http://jaeger.example:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Errorf("trace link %q, %v", link, err)
	}
	screenshot(t, ctx, "console-message.png")

	// Fix the receiver, redrive from the page (a dry-run count, then the
	// confirmation), and watch the message become sent.
	partner.set(false)
	run("redrive", chromedp.Click(css(`#redrive`)))
	waitElement("the confirmation", `#confirm`)
	if count := text(`#count`); count != "1" {
		t.Fatalf("the dry run counted %q", count)
	}
	run("confirm", chromedp.Click(css(`#confirm`)))
	waitElement("the result", `#follow`)
	run("follow the message", chromedp.Click(css(`#follow`)))
	waitText("the message sent", `#status`, "sent")

	// Pause partner from the overview: deliveries stop.
	row := `tr[data-sink="partner"] `
	run("back to the overview", chromedp.Navigate(base+"/"))
	waitElement("the overview", row+`details summary`)
	run("pause",
		chromedp.Click(css(row+`details summary`)),
		chromedp.SendKeys(css(row+`form.pause input[name=reason]`), "partner maintenance"),
		chromedp.Click(css(row+`form.pause button`)),
	)
	waitText("partner paused", cell("partner", "state"), "paused until resumed by admin: partner maintenance")
	before := partner.count()
	enqueue(t, base, "partner", "order-during-pause", `{"order": 99}`)
	// Nothing arrives while paused: the relay polls every 100ms and was
	// woken by the enqueue; a second and a half is 15 chances to deliver.
	time.Sleep(1500 * time.Millisecond)
	if got := partner.count(); got != before {
		t.Fatalf("%d deliveries to the paused sink", got-before)
	}
	// Resume from the page: the waiting message goes out.
	run("resume",
		chromedp.Click(css(row+`details summary`)),
		chromedp.Click(css(row+`form.resume button`)),
	)
	waitText("partner running", cell("partner", "state"), "running")
	deadline := time.Now().Add(step)
	for partner.count() == before {
		if time.Now().After(deadline) {
			t.Fatal("the message enqueued during the pause was not delivered after the resume")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readToken is a token of the read role, named viewer.
const readToken = "browser-read-token"

// Signed in with a read-only token, the console says who is signed in,
// offers no purge or redrive (nor pause), refuses a purge form posted
// anyway and the API refuses the token's purge; the audit page lists the
// purge the admin did, by name; the overview and a sink's page fit an
// 800 px window, the sink's page without actions.
// (Mutations, each failing this test: the dead-letter page's toolbar shown
// whatever the role; the console's allow() passing every role; the audit
// page not listing the trail; the 800 px media query removed.)
func TestReadOnlySignInAndTheAuditPage(t *testing.T) {
	partner, audit := newReceiver(t, true), newReceiver(t, false)
	base := startOutboxd(t, partner, audit, "  tokens:\n    - {name: viewer, token: "+readToken+", role: read}")
	for i := range 2 {
		enqueue(t, base, "partner", fmt.Sprintf("doomed-%d", i), `{"order": 1}`)
	}
	for deadline := time.Now().Add(step); deadLetters(t, base) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the two messages did not die")
		}
	}
	p := &page{t: t, ctx: newBrowser(t)}
	p.run("open the console", chromedp.Navigate(base+"/dead-letters?sink=partner"))
	p.waitElement("the sign-in page", `#token`)
	p.run("sign in", chromedp.SendKeys(chromedp.CSS(`#token`), readToken), chromedp.Click(chromedp.CSS(`#signin`)))
	p.waitText("who is signed in", `#who`, "viewer (read)")
	p.waitFor("the two dead letters", `document.querySelectorAll("#dead-letters tbody input[name=ids]").length === 2`, func() string { return p.text("main") })
	p.waitElement("the read-only note", `#read-only`)
	if eval[bool](p, `document.querySelector("#purge-matching, button[value^=purge], button[value^=redrive]") !== null`) {
		t.Fatal("the read-only token is offered purge or redrive")
	}
	refused := eval[float64](p, `(async () => {
		const form = new URLSearchParams({csrf: document.querySelector("input[name=csrf]").value, do: "purge-matching", sink: "partner"});
		const r = await fetch("/dead-letters/confirm", {method: "POST", body: form});
		return r.status; })()`)
	if refused != http.StatusForbidden {
		t.Fatalf("a purge form posted with the read-only token: %v, want 403", refused)
	}
	if code := post(t, base+"/v1/dlq/purge", readToken, `{"all": true, "sink": "partner"}`); code != http.StatusForbidden {
		t.Fatalf("a purge through the API with the read-only token: %d, want 403", code)
	}
	p.run("the overview", chromedp.Navigate(base+"/"))
	p.waitElement("the overview", `tr[data-sink="partner"]`)
	if eval[bool](p, `document.querySelector("#overview details, #overview form") !== null`) {
		t.Fatal("the read-only token is offered pause or resume")
	}

	p.run("an 800 px window", chromedp.EmulateViewport(800, 900), chromedp.Navigate(base+"/"))
	p.waitText("partner's dead letters on the overview", `tr[data-sink="partner"] [data-cell="dead"]`, "2")
	checkOverviewColumns(p, 800)
	screenshot(t, p.ctx, "console-overview-800.png")
	p.run("partner's page at 800 px", chromedp.Navigate(base+"/sinks/partner"))
	p.waitElement("partner's page", `#minutes`)
	checkSinkPage(p, 800, 2)
	if eval[bool](p, `document.querySelector("form[action^='/sinks/'], form[action='/dead-letters/confirm']") !== null`) {
		t.Fatal("the read-only token is offered the sink's actions")
	}

	if code := post(t, base+"/v1/dlq/purge", token, `{"all": true, "sink": "partner"}`); code != http.StatusOK {
		t.Fatalf("the admin's purge: %d", code)
	}
	p.run("the audit page", chromedp.Navigate(base+"/audit"))
	p.waitText("the admin's purge on the audit page", `#audit tbody tr[data-action="purge"] [data-cell="actor"]`, "admin")
	if n := p.text(`#audit tbody tr[data-action="purge"] [data-cell="count"]`); n != "2" {
		t.Fatalf("the purge's count on the audit page: %q, want 2", n)
	}
	screenshot(t, p.ctx, "console-audit.png")

}

// checkOverviewColumns checks the overview in a window width px wide:
// every column of the sinks' table has a header whose borders line up
// with its cells', no zero is drawn in the failures' red (while a
// nonzero dead count is), and the table fits the window.
// (Mutations, each failing these checks: console.css's flex box for a
// bare .actions, which took the overview's actions cell out of the row:
// its borders spanned 185-214 px in a row of 170-228; overview.go marking
// "failed" bad whatever the count: audit's zero was drawn in red.)
func checkOverviewColumns(p *page, width float64) {
	p.t.Helper()
	p.waitElement("the overview", `tr[data-sink="partner"]`)
	misaligned := eval[string](p, `(() => {
		const t = document.querySelector("table.sinks");
		const heads = t.tHead.rows[0].cells;
		for (const row of t.tBodies[0].rows) {
			if (row.cells.length !== heads.length) return row.dataset.sink + ": " + row.cells.length + " cells under " + heads.length + " headers";
			const r = row.getBoundingClientRect();
			for (let i = 0; i < heads.length; i++) {
				if (heads[i].textContent.trim() === "") return "column " + i + " has no header";
				const h = heads[i].getBoundingClientRect(), c = row.cells[i].getBoundingClientRect();
				if (c.width === 0) continue; // a column the window's width hides
				if (Math.abs(h.left - c.left) > 1 || Math.abs(h.right - c.right) > 1)
					return row.dataset.sink + ": column " + i + " header " + h.left + "-" + h.right + ", cell " + c.left + "-" + c.right;
				if (Math.abs(r.top - c.top) > 1 || Math.abs(r.bottom - c.bottom) > 1)
					return row.dataset.sink + ": column " + i + " spans " + c.top + "-" + c.bottom + " in a row " + r.top + "-" + r.bottom;
			}
		}
		return ""; })()`)
	if misaligned != "" {
		p.t.Errorf("%v px: the overview's columns do not line up: %s", width, misaligned)
	}
	red := `(s) => getComputedStyle(document.querySelector(s)).color === "rgb(192, 57, 43)"`
	if !eval[bool](p, `(`+red+`)('tr[data-sink="partner"] [data-cell="dead"]')`) {
		p.t.Errorf("%v px: partner's dead letters are not drawn in red", width)
	}
	if eval[bool](p, `(`+red+`)('tr[data-sink="audit"] [data-cell="failed"]')`) {
		p.t.Errorf("%v px: audit's zero failed is drawn in red", width)
	}
	if w := eval[float64](p, `document.documentElement.scrollWidth`); w > width {
		p.t.Errorf("the overview is %v px wide in a %v px window", w, width)
	}
}

// checkSinkPage checks partner's page, whose died messages died of the
// receiver's 503: its last error, its dead letters grouped by that error,
// minutes that counted the deaths, and a page that fits the window.
func checkSinkPage(p *page, width float64, died int) {
	p.t.Helper()
	if last := p.text(`#last-error`); !strings.Contains(last, "503") {
		p.t.Errorf("partner's last error: %q, want the receiver's 503", last)
	}
	if groups := p.text(`#dead-letter-groups tbody`); !strings.Contains(groups, "503") {
		p.t.Errorf("partner's dead letters by error: %q", groups)
	}
	if counted := eval[float64](p, `[...document.querySelectorAll("#minutes tbody tr")].reduce((n, tr) => n + Number(tr.cells[3].textContent), 0)`); counted < float64(died) {
		p.t.Errorf("partner's minutes count %v deaths, want at least %d", counted, died)
	}
	if w := eval[float64](p, `document.documentElement.scrollWidth`); w > width {
		p.t.Errorf("the sink's page is %v px wide in a %v px window", w, width)
	}
}

// deadLetters counts partner's dead letters through the API.
func deadLetters(t *testing.T, base string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/dlq?sink=partner", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var letters []json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&letters); err != nil {
		t.Fatal(err)
	}
	return len(letters)
}

// page drives one browser tab with waits that tolerate a page being
// replaced (after a form is submitted, or when the message page reloads
// itself).
type page struct {
	t   *testing.T
	ctx context.Context
}

// run does steps, each bounded by step.
func (p *page) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	sctx, cancel := context.WithTimeout(p.ctx, step)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// text reads an element's text in one evaluation in the page, and
// again while the element is missing: the message page reloads itself,
// and a node looked up before a reload is gone after it.
func (p *page) text(selector string) string {
	p.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e === null ? null : e.textContent; })()`, selector)
	deadline := time.Now().Add(step)
	for {
		sctx, cancel := context.WithTimeout(p.ctx, time.Second)
		s, err := chromedp.Run(sctx, chromedp.Evaluate[*string](expr))
		cancel()
		if err == nil && s != nil {
			return *s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("text of %s: not found within %s (%v)", selector, step, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	sctx, cancel := context.WithTimeout(p.ctx, step)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the JavaScript expression holds. It asks the page
// every 100ms from here rather than with chromedp's waits, which can lose
// track of a page that is being replaced.
func (p *page) waitFor(what, expr string, shows func() string) {
	p.t.Helper()
	deadline := time.Now().Add(step)
	for {
		sctx, cancel := context.WithTimeout(p.ctx, time.Second)
		ok, err := chromedp.Run(sctx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not within %s (%v; the page shows %q)", what, step, err, shows())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *page) waitElement(what, selector string) {
	p.t.Helper()
	p.waitFor(what, fmt.Sprintf(`document.querySelector(%q) !== null`, selector), func() string { return p.text("main") })
}

func (p *page) waitText(what, selector, want string) {
	p.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e !== null && e.textContent.includes(%q); })()`, selector, want)
	p.waitFor(what, expr, func() string { return p.text(selector) })
}

// startOutboxd skips (or, in CI, fails) without Chromium, then builds
// outboxd, migrates a configuration for the receivers (with httpExtra in
// its http block) and serves it until the test ends; it returns the
// server's base URL.
func startOutboxd(t *testing.T, partner, audit *receiver, httpExtra ...string) string {
	t.Helper()
	requireChromium(t)
	return serveConfig(t, writeConfig(t, partner, audit, httpExtra...), proc.Environ())
}

// requireChromium skips (or, in CI, fails) the test without Chromium.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		testenv.SkipOrFail(t, chromium+" is missing (apt-get install chromium; .ci/run installs it)")
	}
}

// serveConfig builds outboxd, migrates config and serves it with env
// until the test ends; it returns the server's base URL.
func serveConfig(t *testing.T, config string, env []string) string {
	t.Helper()
	bin := buildOutboxd(t)
	if r, err := proc.Run(context.Background(), bin, env, nil, "--config", config, "migrate"); err != nil || r.Code != 0 {
		t.Fatalf("migrate: %v %+v", err, r)
	}
	srv := proc.Serve(t, bin, config, env)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("outboxd serve:\n%s", srv.Logs())
		}
	})
	return "http://" + srv.Addr()
}

// buildOutboxd builds the binary from the repository's own module (two
// directories up), into the test's temporary directory.
func buildOutboxd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outboxd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/outboxd")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/outboxd: %v\n%s", err, out)
	}
	return bin
}

// writeConfig writes a configuration for a fresh schema (dropped at the
// end) with sinks partner and audit delivering to the receivers.
func writeConfig(t *testing.T, partner, audit *receiver, httpExtra ...string) string {
	t.Helper()
	schema := freshSchema(t)
	// No circuit breaker: the pages show the partner's messages dead after
	// their two attempts, and a breaker opening after five failures held
	// some of them pending instead, as it should, whenever the relay's
	// deliveries happened to interleave so (a loaded CI run).
	sink := func(name string, r *receiver) string {
		return fmt.Sprintf("  %s:\n    type: webhook\n    max_attempts: 2\n    backoff: {initial: 100ms, max: 200ms}\n    circuit_breaker: {enabled: false}\n"+
			"    options: {url: %q, secret: \"whsec_YnJvd3Nlci10ZXN0LXNpZ25pbmcta2V5LTMyLWJ5dGVz\", allow_private: true}\n", name, r.URL)
	}
	cfg := fmt.Sprintf(`database:
  url: %s
  schema: %s
relay:
  poll_interval: 100ms
http:
  listen: 127.0.0.1:0
  token: %s
%s
telemetry:
  trace_url: http://jaeger.example:16686/trace/{trace_id}
sinks:
%s%s`, testdb.URL(), schema, token, strings.Join(httpExtra, "\n"), sink("partner", partner), sink("audit", audit))
	return writeFile(t, cfg)
}

// freshSchema names a schema of the test's own, dropped at its end.
func freshSchema(t *testing.T) string {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "browser_" + hex.EncodeToString(suffix)
	pool := testdb.Pool(t, 1)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	return schema
}

// writeFile writes a configuration into the test's temporary directory.
func writeFile(t *testing.T, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func dropSchema(t *testing.T, pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// enqueue posts a message through the API, inside a trace.
func enqueue(t *testing.T, base, sink, key, payload string) {
	t.Helper()
	body := fmt.Sprintf(`{"sink": %q, "dedup_key": %q, "payload": %s}`, sink, key, payload)
	if code := post(t, base+"/v1/messages", token, body); code != http.StatusCreated {
		t.Fatalf("enqueue %s/%s: %d", sink, key, code)
	}
}

// post sends a JSON body to the API with a bearer token, inside a trace,
// and returns the status.
func post(t *testing.T, url, bearer, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// newBrowser starts a headless Chromium with a fresh profile for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	return ctx
}

// screenshot saves the page to $OUTBOXD_SCREENSHOTS/name, when set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, step)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
