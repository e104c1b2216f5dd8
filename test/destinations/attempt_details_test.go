package destinations_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/server/api"
)

// opsKey is a secret of the configuration (a header of the ops sink) that
// the test's receiver echoes in its answer.
const opsKey = "ops-key-4f1c9e2b7d"

// Each attempt's details with the real binary: a refused delivery's
// failed attempt and a delivered one's last attempt record when they
// started, how long they took, the receiver's HTTP status and the start
// of its answer, cut at 4 KiB on a character boundary (a 3-byte character
// straddles the bound), with a secret of the configuration the receiver
// echoed scrubbed. outboxd get shows the operator the address the request
// went to; the tenant's deliveries (the API's and the portal's) never do.
// (Mutations: ForTenant keeping remote_addr, in the last attempt and the
// failed attempts' details, shows the address in the tenant's deliveries
// of the API and of the portal; the relay storing the answer without
// Config.Redact keeps the configuration's secret in it.)
func TestAttemptDetailsRecordTheReceiversAnswer(t *testing.T) {
	t.Parallel()
	rcv := newAnsweringReceiver(t)
	o := serve(t, setup{poll: "200ms",
		sinks: fmt.Sprintf("  ops:\n    type: webhook\n    options: {url: %q, allow_private: true, headers: {X-Api-Key: %q}}\n", rcv.URL+"/ops", opsKey)})
	var dst destinations.Created
	o.call(t, http.MethodPost, "/v1/tenants/acme/destinations", map[string]any{"url": rcv.URL + "/acme"}, &dst)

	// 4,095 bytes, then a character of three: the bound falls inside it.
	refusal := "refused, key " + opsKey + " " + strings.Repeat("x", sink.MaxAnswerBytes-1-len("refused, key "+opsKey+" ")) + "€ and more"
	rcv.answer(http.StatusBadRequest, refusal)
	o.publishSQL(t, true, [3]string{"order.created", "acme", "refused"})
	testrelay.WaitFor(t, deliveryTimeout, "the refused event dead", func() bool { return o.statusCounts(t, dst.ID)["dead"] == 1 })
	rcv.answer(http.StatusOK, `{"thanks": true}`)
	o.publishSQL(t, true, [3]string{"order.created", "acme", "taken"})
	testrelay.WaitFor(t, deliveryTimeout, "the second event delivered", func() bool { return len(rcv.accepted()["taken"]) == 1 })

	var page api.DeliveryPage
	testrelay.WaitFor(t, deliveryTimeout, "both deliveries listed, the delivered one with its last attempt", func() bool {
		o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+dst.ID+"/deliveries", nil, &page)
		return len(page.Deliveries) == 2 && page.Deliveries[0].LastAttempt != nil
	})
	taken, refused := page.Deliveries[0], page.Deliveries[1]
	if a := taken.LastAttempt; a.Status != http.StatusOK || a.Response != `{"thanks": true}` || a.DurationMS <= 0 || a.StartedAt.IsZero() {
		t.Errorf("the delivered event's last attempt: %+v, want HTTP 200, its answer, a start and a duration", a)
	}
	var failed []operator.AttemptError
	if err := json.Unmarshal(refused.FailedAttempts, &failed); err != nil || len(failed) != 1 || failed[0].Details == nil {
		t.Fatalf("the refused event's failed attempts: %s (%v), want one with details", refused.FailedAttempts, err)
	}
	a := failed[0].Details
	if a.Status != http.StatusBadRequest || a.DurationMS <= 0 || a.StartedAt.IsZero() {
		t.Errorf("the failed attempt's details: status %d, duration %v ms, started %v", a.Status, a.DurationMS, a.StartedAt)
	}
	if strings.Contains(a.Response, opsKey) || !strings.Contains(a.Response, "refused, key ") {
		t.Errorf("the stored answer still holds the configuration's secret, or lost its text: %.80q", a.Response)
	}
	if !utf8.ValidString(a.Response) || len(a.Response) > sink.MaxAnswerBytes || strings.Contains(a.Response, "€") || strings.Contains(a.Response, `\x`) {
		t.Errorf("the stored answer (%d bytes) is not the first 4 KiB cut at a character: ...%q", len(a.Response), a.Response[max(0, len(a.Response)-40):])
	}
	// The tenant's view of the deliveries names no address.
	raw := o.page(t, "/v1/tenants/acme/destinations/"+dst.ID+"/deliveries")
	if strings.Contains(raw, "remote_addr") {
		t.Errorf("the tenant's deliveries name the address the requests went to:\n%s", raw)
	}

	// The operator's lookup does, and shows the same details.
	host := strings.TrimPrefix(rcv.URL, "http://")
	var m api.MessageReport
	if err := json.Unmarshal([]byte(o.run(t, "get", strconv.FormatInt(refused.ID, 10), "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.FailedAttempts) != 1 || m.FailedAttempts[0].Details == nil || m.FailedAttempts[0].Details.RemoteAddr != host {
		t.Errorf("outboxd get's failed attempts %+v, want the address %s", m.FailedAttempts, host)
	}
	table := o.run(t, "get", strconv.FormatInt(taken.ID, 10))
	for _, want := range []string{"last attempt", "HTTP 200", host, `{"thanks": true}`} {
		if !strings.Contains(table, want) {
			t.Errorf("outboxd get's table lacks %q:\n%s", want, table)
		}
	}

	// The portal, the tenant's own pages, shows the status and not the address.
	portal := o.openPortal(t, "acme").get("/portal/destinations/" + dst.ID)
	// (The destination's URL holds the receiver's host:port too.)
	if !strings.Contains(portal, `class="http-status">400<`) || !strings.Contains(portal, `class="http-status">200<`) || strings.Contains(portal, "remote-addr") {
		t.Errorf("the portal's deliveries do not show the statuses, or show the address an attempt went to:\n%s", portal)
	}
}
