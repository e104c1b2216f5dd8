package destinations_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/server/api"
)

// answeringReceiver records each request's webhook-id and event, and
// answers every request with the status and body it is set to.
type answeringReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	body   string
	got    []delivered
}

// delivered is one request: its webhook-id, its event's data.order and
// the status it was answered.
type delivered struct {
	webhookID, order string
	status           int
}

func newAnsweringReceiver(t *testing.T) *answeringReceiver {
	r := &answeringReceiver{status: http.StatusNoContent}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ev struct {
			Data struct{ Order string } `json:"data"`
		}
		_ = json.Unmarshal(b, &ev)
		r.mu.Lock()
		status, body := r.status, r.body
		r.got = append(r.got, delivered{req.Header.Get("webhook-id"), ev.Data.Order, status})
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(r.Close)
	return r
}

// answer sets what the receiver answers from now on.
func (r *answeringReceiver) answer(status int, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.body = status, body
}

// accepted returns, for each order answered with success, the webhook-ids
// it came under, in order.
func (r *answeringReceiver) accepted() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]string{}
	for _, d := range r.got {
		if d.status < 300 {
			out[d.order] = append(out[d.order], d.webhookID)
		}
	}
	return out
}

// firstID is the webhook-id order first came under, answered or not.
func (r *answeringReceiver) firstID(order string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.got {
		if d.order == order {
			return d.webhookID
		}
	}
	return ""
}

// A destination's recovery with the real binary: its dead events are
// counted (dry run, a token) and sent again with the token through the
// API; then its delivered ones too through the CLI (--include-delivered,
// --dry-run, then --yes) and the tenant's portal form; a stale token answers 409 with the new count
// and a confirmation without one 422; every re-sent delivery carries the
// webhook-id of its first delivery, and the recovery is audited.
// (Mutation: the digest check dropped from destination_recover.sql's
// confirmation makes the stale token recover all six instead of
// answering 409, and the CLI then counts five.)
func TestRecoveryResendsTheWindowUnderTheOriginalWebhookIDs(t *testing.T) {
	t.Parallel()
	rcv := newAnsweringReceiver(t)
	o := serve(t, setup{poll: "200ms"})
	var dst destinations.Created
	o.call(t, http.MethodPost, "/v1/tenants/acme/destinations", map[string]any{"url": rcv.URL + "/acme"}, &dst)
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	recoverPath := "/v1/tenants/acme/destinations/" + dst.ID + "/recover"

	for _, order := range []string{"a1", "a2", "a3"} {
		o.publishSQL(t, true, [3]string{"order.created", "acme", order})
	}
	testrelay.WaitFor(t, deliveryTimeout, "three events delivered", func() bool { return len(rcv.accepted()) == 3 })
	// A refusal (4xx) kills an event at once.
	rcv.answer(http.StatusGone, "gone")
	for _, order := range []string{"d1", "d2"} {
		o.publishSQL(t, true, [3]string{"order.created", "acme", order})
	}
	testrelay.WaitFor(t, deliveryTimeout, "two events dead", func() bool { return o.statusCounts(t, dst.ID)["dead"] == 2 })
	rcv.answer(http.StatusNoContent, "")

	// The dead ones: counted, then sent again with the token.
	var count api.RecoverAnswer
	o.call(t, http.MethodPost, recoverPath, map[string]any{"since": since, "dry_run": true}, &count)
	if count.Dead != 2 || count.Delivered != 0 || count.Rows != 2 || count.Token == "" || !count.DryRun {
		t.Fatalf("dry run of the dead events answered %+v, want 2 dead and a token", count)
	}
	if status, body := rawCall(t, o, http.MethodPost, recoverPath, fmt.Sprintf(`{"since": %q}`, since)); status != http.StatusUnprocessableEntity || !strings.Contains(body, "token") {
		t.Errorf("a recovery without a token answered %d %s, want 422 naming the token", status, body)
	}
	var done api.RecoverAnswer
	o.call(t, http.MethodPost, recoverPath, map[string]any{"since": since, "token": count.Token}, &done)
	if done.Recovered != 2 {
		t.Fatalf("the recovery answered %+v, want 2 recovered", done)
	}
	testrelay.WaitFor(t, deliveryTimeout, "the dead events delivered once recovered", func() bool {
		got := rcv.accepted()
		return len(got["d1"]) == 1 && len(got["d2"]) == 1
	})
	for _, order := range []string{"d1", "d2"} {
		if got, first := rcv.accepted()[order][0], rcv.firstID(order); got != first || first == "" {
			t.Errorf("recovered %s came under webhook-id %q, first under %q: want the same", order, got, first)
		}
	}

	// A count that changed (an event delivered since): 409 with the new
	// count, nothing sent.
	inHistory := func() bool { return len(o.statusCounts(t, dst.ID)) == 0 }
	testrelay.WaitFor(t, deliveryTimeout, "every event of the destination in the history", inHistory)
	var stale api.RecoverAnswer
	o.call(t, http.MethodPost, recoverPath+"?dry_run=true", map[string]any{"since": since, "include_delivered": true}, &stale)
	o.publishSQL(t, true, [3]string{"order.created", "acme", "a4"})
	testrelay.WaitFor(t, deliveryTimeout, "a fourth event delivered", func() bool { return len(rcv.accepted()["a4"]) == 1 })
	testrelay.WaitFor(t, deliveryTimeout, "the fourth event in the history", inHistory)
	status, body := rawCall(t, o, http.MethodPost, recoverPath, fmt.Sprintf(`{"since": %q, "include_delivered": true, "token": %q}`, since, stale.Token))
	var changed struct {
		Rows  int64
		Token string
	}
	_ = json.Unmarshal([]byte(body), &changed)
	if status != http.StatusConflict || changed.Rows != stale.Rows+1 || changed.Token == "" || changed.Token == stale.Token {
		t.Errorf("a stale token answered %d %s, want 409 with %d rows and a new token", status, body, stale.Rows+1)
	}

	// The delivered ones too, from the CLI: counted, then sent again.
	args := []string{"destinations", "recover", dst.ID, "--tenant", "acme", "--since", since, "--include-delivered"}
	if out := o.run(t, append(args, "--dry-run")...); !strings.Contains(out, "6 event(s) would be sent again (0 dead, 6 delivered)") {
		t.Errorf("recover --dry-run printed %q, want 6 delivered events counted", out)
	}
	if r, err := proc.Run(t.Context(), binary, o.env, nil, append([]string{"--config", o.config}, args...)...); err != nil || r.Code != 2 {
		t.Errorf("recover without --yes and without a terminal: %v %+v, want exit 2", err, r)
	}
	if out := o.run(t, append(args, "--yes")...); !strings.Contains(out, "6 event(s) sent again (0 dead, 6 delivered)") {
		t.Errorf("recover --yes printed %q, want 6 sent again", out)
	}
	testrelay.WaitFor(t, deliveryTimeout, "every delivered event delivered again", func() bool {
		for _, ids := range rcv.accepted() {
			if len(ids) != 2 {
				return false
			}
		}
		return len(rcv.accepted()) == 6
	})
	// The receiver has them before the relay records them: the portal
	// below counts only what is settled, and an event still being
	// finished is neither dead nor delivered yet (CI counted 5 of 6
	// without this wait).
	testrelay.WaitFor(t, deliveryTimeout, "every re-sent event in the history", inHistory)
	for order, ids := range rcv.accepted() {
		if first := rcv.firstID(order); ids[0] != first || ids[1] != first {
			t.Errorf("%s was delivered under webhook-ids %q, first under %q: want the same every time", order, ids, first)
		}
	}

	// The tenant's portal form: counted on a confirmation page, then sent
	// again with the page's token.
	portal := o.openPortal(t, "acme")
	post := func(path string, form url.Values) string {
		t.Helper()
		code, body := portal.post(path, form)
		if code != http.StatusOK {
			t.Fatalf("POST %s: %d\n%s", path, code, body)
		}
		return body
	}
	form := url.Values{"csrf": {portal.csrf("/portal/destinations/" + dst.ID)}, "since": {since}, "include_delivered": {"on"}}
	confirm := post("/portal/destinations/"+dst.ID+"/recover", form)
	token := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(confirm)
	if !strings.Contains(confirm, `<strong id="recover-count">6</strong>`) || token == nil {
		t.Fatalf("the portal's count page does not count 6 events with a token:\n%s", confirm)
	}
	form.Set("confirm", "yes")
	form.Set("token", token[1])
	if done := post("/portal/destinations/"+dst.ID+"/recover", form); !strings.Contains(done, "Sent again: 6") {
		t.Errorf("the portal's recovery says:\n%s", done)
	}
	testrelay.WaitFor(t, deliveryTimeout, "every event delivered a third time", func() bool {
		for _, ids := range rcv.accepted() {
			if len(ids) != 3 || ids[2] != ids[0] {
				return false
			}
		}
		return true
	})

	var audit struct {
		Entries []struct {
			Action, Source string
			Count          int64
		}
	}
	o.call(t, http.MethodGet, "/v1/audit", nil, &audit)
	// Newest first: the portal's recovery, its link, the CLI's recovery.
	if e := audit.Entries; len(e) < 3 || e[0].Action != "destination_recover" || e[0].Count != 6 ||
		e[2].Action != "destination_recover" || e[2].Source != "cli" || e[2].Count != 6 {
		t.Errorf("audit trail's newest entries %+v, want the portal's and the CLI's destination_recover of 6 events", e)
	}
}
