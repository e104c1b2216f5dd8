package browser_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// downHook is an endpoint that is down: it answers every request 503,
// an outage signal, so the relay's breaker opens on it.
func downHook(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "endpoint down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(s.Close)
	return s
}

// events records the events an endpoint accepts, by type.
type events struct {
	*httptest.Server
	mu   sync.Mutex
	data map[string][]json.RawMessage
}

func newEvents(t *testing.T) *events {
	e := &events{data: map[string][]json.RawMessage{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type string
			Data json.RawMessage
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		e.mu.Lock()
		e.data[ev.Type] = append(e.data[ev.Type], ev.Data)
		e.mu.Unlock()
	}))
	t.Cleanup(e.Close)
	return e
}

// of is the data of every event of type typ received, one JSON document
// a line.
func (e *events) of(typ string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, d := range e.data[typ] {
		b.Write(d)
		b.WriteByte('\n')
	}
	return b.String()
}

// A tenant in its portal, in Chromium: an endpoint that is down shows
// "Failing since" with its last failure, a working one "Healthy" with
// its deliveries of the last 24 hours counted and a latency; the catalog
// page lists the operator's event types with their examples and outboxd's
// operational events, the subscription form offers them, and a test event
// of a catalog type, picked in the form, reaches the endpoint with the
// type's example as data. The page names no sink.
// (Mutations, each failing this test: healthOf ignoring the breaker (the
// down endpoint shows healthy); the test form's type not read
// (testEventOf always outboxd.test: no invoice.paid arrives).)
func TestPortalHealthFiguresCatalogAndTestEvent(t *testing.T) {
	up, down := newEvents(t), downHook(t)
	// Enough attempts that the down endpoint's rows wait behind its
	// breaker rather than die.
	base := startPortalOutboxd(t, 50, `event_types:
  - name: invoice.paid
    description: An invoice was paid in full.
    example: {account: acme, invoice: inv_example, amount: 1200}
    schema: {type: object, required: [invoice, amount]}
`)
	var healthy, failing struct{ ID string }
	for _, d := range []struct {
		url string
		out *struct{ ID string }
	}{{up.URL, &healthy}, {down.URL, &failing}} {
		body := fmt.Sprintf(`{"url": %q, "events": ["invoice.*"], "description": "acme's endpoint"}`, d.url)
		if code := api(t, "POST", base+"/v1/tenants/acme/destinations", body, d.out); code != http.StatusCreated {
			t.Fatalf("create acme's destination: %d", code)
		}
	}
	for i := range 8 {
		body := fmt.Sprintf(`{"type": "invoice.paid", "key": "invoice-%d", "data": {"account": "acme", "invoice": "inv_%d", "amount": 10}}`, i, i)
		if code := api(t, "POST", base+"/v1/events", body, nil); code != http.StatusCreated {
			t.Fatalf("publish an invoice: %d", code)
		}
	}
	var link struct{ URL string }
	if code := api(t, "POST", base+"/v1/tenants/acme/portal", `{}`, &link); code != http.StatusOK {
		t.Fatalf("acme's portal link: %d", code)
	}
	p := &page{t: t, ctx: newBrowser(t)}
	p.run("open the portal", chromedp.Navigate(link.URL))
	p.waitElement("acme's portal", `#destinations`)

	// Each page is a snapshot: look again until the relay has caught up.
	until := func(what, path, selector, want string) {
		t.Helper()
		deadline := time.Now().Add(3 * step)
		for {
			p.run("open "+path, chromedp.Navigate(base+path))
			p.waitElement(what, selector)
			if strings.Contains(p.text(selector), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s shows %q, want %q", what, selector, p.text(selector), want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	until("the down endpoint failing", "/portal/destinations/"+failing.ID, "#health-state", "Failing since")
	if last := p.text("#last-error"); !strings.Contains(last, "503") {
		t.Errorf("the failing endpoint's last error %q", last)
	}
	until("the working endpoint's deliveries counted", "/portal/destinations/"+healthy.ID, "#stats-delivered", "8")
	if state, p50 := p.text("#health-state"), p.text("#stats-p50"); state != "Healthy" || p50 == "0.0 ms" {
		t.Errorf("the working endpoint: %q, median latency %q", state, p50)
	}
	if strings.Contains(strings.ToLower(p.text("main")), "sink") || strings.Contains(p.text("main"), "customers") {
		t.Errorf("the endpoint's page names a sink:\n%s", p.text("main"))
	}
	p.waitElement("the catalog in the edit form", `#catalog input[value="invoice.paid"]`)
	p.waitElement("the operational events in the edit form", `#catalog input[value="outboxd.destination.failing"]`)
	screenshot(t, p.ctx, "portal-health.png")

	// A test event of the catalog's type, with its example.
	p.run("pick invoice.paid", chromedp.Evaluate[chromedp.Void](`document.querySelector("#test-type").value = "invoice.paid"`))
	p.click("send the test event", `#send-test`)
	p.waitText("the test event sent", `#done-said`, "invoice.paid")
	deadline := time.Now().Add(step)
	for !strings.Contains(up.of("invoice.paid"), "inv_example") {
		if time.Now().After(deadline) {
			t.Fatalf("the example did not arrive; invoice.paid data received: %s", up.of("invoice.paid"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	p.run("the catalog page", chromedp.Navigate(base+"/portal/event-types"))
	p.waitText("the catalog lists invoice.paid with its example", `#catalog tr[data-type="invoice.paid"]`, "inv_example")
	p.waitElement("the catalog lists the operational events", `#catalog tr[data-type="outboxd.destination.recovered"]`)
	screenshot(t, p.ctx, "portal-event-types.png")
}
